package filter

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Tool says which command reads a filter file: the object types and
// commands each accepts differ, as they do between pg_dump and pg_restore.
type Tool int

// The commands that take --filter.
const (
	ForDump    Tool = iota // pgsprint dump: pg_dump's rules
	ForClone               // pgsprint clone: pg_dump's rules (it reads a live source)
	ForRestore             // pgsprint restore: selects from the archive's list of relations
)

// ReadFile adds the selection of a filter file in PostgreSQL 17's format
// (pg_dump --filter) to o: one "include|exclude OBJECT_TYPE PATTERN" per
// line, # comments, patterns quoted as identifiers (a quoted pattern may
// span lines). name is the file's name for messages; every error names it
// and the line, as pg_dump does.
func (o *Options) ReadFile(r io.Reader, name string, tool Tool) error {
	p := &fileParser{in: bufio.NewReader(r), name: name}
	for {
		cmd, typ, pat, line, err := p.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := o.addFilter(cmd, typ, pat, tool); err != nil {
			return fmt.Errorf("filter file %s line %d: %w", name, line, err)
		}
	}
}

// addFilter applies one line of a filter file: the flag it stands for.
func (o *Options) addFilter(cmd, typ, pat string, tool Tool) error {
	include := cmd == "include"
	notFor := func(why string) error {
		return fmt.Errorf("%s %s is not supported by pgsprint %s: %s", cmd, typ, toolName(tool), why)
	}
	noInclude := func() error {
		return fmt.Errorf("%s filter for %q is not allowed (%s %s takes only exclude)", typ, pat, toolName(tool), typ)
	}
	live := tool != ForRestore
	switch typ {
	case "table":
		o.addTo(include, &o.Tables, &o.ExcludeTables, pat)
	case "schema":
		o.addTo(include, &o.Schemas, &o.ExcludeSchemas, pat)
	case "table_data":
		if include {
			return noInclude()
		}
		o.ExcludeTableData = append(o.ExcludeTableData, pat)
	case "table_and_children", "table_data_and_children":
		if !live {
			return notFor("an archive does not record which tables inherit from which; restore the tables by name (table)")
		}
		switch {
		case typ == "table_and_children":
			o.addTo(include, &o.TableAndChildren, &o.ExcludeTableAndChildren, pat)
		case include:
			return noInclude()
		default:
			o.ExcludeTableDataAndChildren = append(o.ExcludeTableDataAndChildren, pat)
		}
	case "extension":
		if !live {
			return notFor("extensions are selected when dumping (pgsprint dump --filter)")
		}
		o.addTo(include, &o.Extensions, &o.ExcludeExtensions, pat)
	case "foreign_data":
		return notFor("pgsprint does not dump the data of foreign tables (pg_dump --include-foreign-data)")
	case "database":
		return notFor("database filters are for pg_dumpall")
	case "function", "index", "trigger":
		return notFor("pgsprint selects schemas and tables (pg_restore's function, index and trigger selection is not supported)")
	default:
		return fmt.Errorf("unsupported filter object type: %q", typ)
	}
	return nil
}

func (o *Options) addTo(include bool, inc, exc *[]string, pat string) {
	if include {
		*inc = append(*inc, pat)
	} else {
		*exc = append(*exc, pat)
	}
}

func toolName(t Tool) string {
	switch t {
	case ForClone:
		return "clone"
	case ForRestore:
		return "restore"
	}
	return "dump"
}

// fileParser reads filter items as PostgreSQL's filter.c does: keywords
// are case-insensitive, a pattern's unquoted words are joined by one space,
// spaces around "." "," "(" ")" are dropped, # ends the pattern, and a
// quoted part keeps everything ("" is a quote; \n and \\ are a newline and
// a backslash) and may go on over several lines.
type fileParser struct {
	in   *bufio.Reader
	name string
	line int
}

// next returns the next item and the line it began on; io.EOF at the end.
func (p *fileParser) next() (cmd, typ, pat string, line int, err error) {
	for {
		text, err := p.readLine()
		if err != nil {
			return "", "", "", 0, err
		}
		rest := strings.TrimLeft(text, " \t\r\n\v\f")
		if rest == "" || rest[0] == '#' {
			continue
		}
		line = p.line
		var word string
		word, rest = keyword(rest)
		cmd = strings.ToLower(word)
		if cmd != "include" && cmd != "exclude" {
			return "", "", "", 0, p.errorf(`invalid filter command (expected "include" or "exclude")`)
		}
		word, rest = keyword(rest)
		if word == "" {
			return "", "", "", 0, p.errorf("missing filter object type")
		}
		typ = strings.ToLower(word)
		if pat, err = p.pattern(rest); err != nil {
			return "", "", "", 0, err
		}
		return cmd, typ, pat, line, nil
	}
}

// readLine returns the next line without its end; io.EOF at the end.
func (p *fileParser) readLine() (string, error) {
	s, err := p.in.ReadString('\n')
	if err == io.EOF && s == "" {
		return "", io.EOF
	}
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read filter file %s: %w", p.name, err)
	}
	p.line++
	return strings.TrimRight(s, "\r\n"), nil
}

func (p *fileParser) errorf(format string, args ...any) error {
	return fmt.Errorf("filter file %s line %d: %s", p.name, p.line, fmt.Sprintf(format, args...))
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// keyword splits off the first run of non-space characters.
func keyword(s string) (string, string) {
	s = strings.TrimLeft(s, " \t\r\n\v\f")
	i := 0
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// pattern reads an object name pattern from the rest of a line (and the
// lines a quoted part runs on to).
func (p *fileParser) pattern(s string) (string, error) {
	s = strings.TrimLeft(s, " \t\r\n\v\f")
	if s == "" || s[0] == '#' {
		return "", p.errorf("missing object name pattern")
	}
	var b strings.Builder
	skipSpace, foundSpace := true, false
	for s != "" && s[0] != '#' {
		for s != "" && !isSpace(s[0]) && !strings.ContainsRune("#,.()\"", rune(s[0])) {
			if !skipSpace && foundSpace {
				b.WriteByte(' ')
				skipSpace = true
			}
			b.WriteByte(s[0])
			s = s[1:]
		}
		skipSpace = false
		switch {
		case s != "" && s[0] == '"':
			if foundSpace {
				b.WriteByte(' ')
			}
			var err error
			if s, err = p.quoted(s, &b); err != nil {
				return "", err
			}
		case s != "" && s[0] == ',':
			b.WriteString(", ")
			skipSpace = true
			s = s[1:]
		case s != "" && strings.ContainsRune(".()", rune(s[0])):
			b.WriteByte(s[0])
			skipSpace = true
			s = s[1:]
		}
		foundSpace = false
		for s != "" && isSpace(s[0]) {
			foundSpace = true
			s = s[1:]
		}
	}
	return b.String(), nil
}

// quoted copies a quoted part, quotes included, from s (which starts with
// the opening quote), reading more lines while it is open; it returns what
// follows the closing quote.
func (p *fileParser) quoted(s string, b *strings.Builder) (string, error) {
	b.WriteByte('"')
	s = s[1:]
	for {
		if s == "" {
			next, err := p.readLine()
			if err == io.EOF {
				return "", p.errorf("unexpected end of file (a quoted pattern is not closed)")
			}
			if err != nil {
				return "", err
			}
			b.WriteByte('\n')
			s = next
			continue
		}
		switch c := s[0]; {
		case c == '"':
			b.WriteByte('"')
			s = s[1:]
			if s == "" || s[0] != '"' {
				return s, nil
			}
			b.WriteByte('"')
			s = s[1:]
		case c == '\\':
			s = s[1:]
			if s != "" {
				switch s[0] {
				case 'n':
					b.WriteByte('\n')
				case '\\':
					b.WriteByte('\\')
				}
				s = s[1:]
			}
		default:
			b.WriteByte(c)
			s = s[1:]
		}
	}
}
