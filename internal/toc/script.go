package toc

import (
	"strings"
)

// ScriptPart is a run of a psql script's SQL statements and the psql
// meta-command line that ends it (\connect, \restrict, ...; "" for the
// last run).
type ScriptPart struct {
	Statements []Statement
	Meta       string
}

// SplitScript splits a psql script that pg_dump, pg_dumpall or pg_restore
// wrote into its SQL statements (Statements: quotes, E” and dollar
// literals, comments) and the meta-commands between them: a line that
// begins with a backslash where no statement is under way. It is the one
// splitter of such scripts: the globals of a whole-server archive, the
// database entries pg_restore --create writes.
func SplitScript(script string) ([]ScriptPart, error) {
	var parts []ScriptPart
	var pending strings.Builder
	flush := func(meta string) error {
		stmts, err := Statements(pending.String())
		if err != nil {
			return err
		}
		for i := range stmts {
			stmts[i].Text = withoutLeadingComments(stmts[i].Text)
		}
		parts = append(parts, ScriptPart{Statements: stmts, Meta: meta})
		pending.Reset()
		return nil
	}
	for _, line := range strings.SplitAfter(script, "\n") {
		if strings.HasPrefix(line, `\`) && betweenStatements(pending.String()) {
			if err := flush(strings.TrimRight(line, "\r\n")); err != nil {
				return nil, err
			}
			continue
		}
		pending.WriteString(line)
	}
	if err := flush(""); err != nil {
		return nil, err
	}
	return parts, nil
}

// withoutLeadingComments drops the -- comment lines before a statement
// (pg_dump's "-- Name: ...; Type: ..." headers), which Statements leaves
// in its text.
func withoutLeadingComments(s string) string {
	for strings.HasPrefix(s, "--") {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return ""
		}
		s = strings.TrimSpace(s[i+1:])
	}
	return s
}

// betweenStatements reports whether sql ends where a statement may begin:
// it holds nothing but comments, or whole statements.
func betweenStatements(sql string) bool {
	toks, err := Tokenize(sql)
	if err != nil {
		return false // inside a literal, identifier or comment
	}
	return len(toks) == 0 || (toks[len(toks)-1].Kind == Punct && toks[len(toks)-1].Text == ";")
}

// Value is what a String token says: its text without quotes, doubled
// quotes undone, and in an E” string the backslash escapes pg_dump and
// pg_dumpall write (\\, \', \n, \r, \t, \b, \f; any other escaped byte
// stands for itself).
func (t Token) Value() string {
	s := t.Text
	switch {
	case t.Kind != String:
		return s
	case strings.HasPrefix(s, "$"):
		tag := dollarTag(s)
		return s[len(tag) : len(s)-len(tag)]
	case s[0] == 'E' || s[0] == 'e':
		var b strings.Builder
		body := s[2 : len(s)-1]
		for i := 0; i < len(body); i++ {
			c := body[i]
			switch {
			case c == '\\' && i+1 < len(body):
				i++
				switch body[i] {
				case 'n':
					b.WriteByte('\n')
				case 'r':
					b.WriteByte('\r')
				case 't':
					b.WriteByte('\t')
				case 'b':
					b.WriteByte('\b')
				case 'f':
					b.WriteByte('\f')
				default:
					b.WriteByte(body[i])
				}
			case c == '\'' && i+1 < len(body) && body[i+1] == '\'':
				b.WriteByte('\'')
				i++
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	}
	return strings.ReplaceAll(s[1:len(s)-1], "''", "'")
}
