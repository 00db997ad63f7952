package toc

import (
	"fmt"
	"strings"
)

// TokenKind classifies a lexical token of pg_dump's SQL.
type TokenKind int

// Token kinds. Keywords are Words; a Word is compared as written, and
// pg_dump writes keywords in upper case and bare identifiers in lower case.
const (
	Word   TokenKind = iota // keyword or bare identifier
	Quoted                  // "quoted identifier"
	String                  // 'literal', E'literal' or $tag$literal$tag$
	Number
	Punct // one character: ( ) , . ; etc., or an operator run
)

// Token is one lexical token; Text is exactly as written.
type Token struct {
	Kind TokenKind
	Text string
}

// Ident returns the identifier a Word or Quoted token names, unquoted.
func (t Token) Ident() string {
	if t.Kind == Quoted {
		return strings.ReplaceAll(t.Text[1:len(t.Text)-1], `""`, `"`)
	}
	return t.Text
}

// IsIdent reports whether the token can name an object.
func (t Token) IsIdent() bool { return t.Kind == Word || t.Kind == Quoted }

// Tokenize splits SQL into tokens, skipping white space and comments. It
// understands what pg_dump emits: standard and E” strings, dollar quoting,
// quoted identifiers, -- and /* */ comments.
func Tokenize(sql string) ([]Token, error) {
	var toks []Token
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				i = len(sql)
			} else {
				i += j + 1
			}
		case strings.HasPrefix(sql[i:], "/*"):
			depth, j := 0, i
			for j < len(sql) {
				if strings.HasPrefix(sql[j:], "/*") {
					depth++
					j += 2
				} else if strings.HasPrefix(sql[j:], "*/") {
					depth--
					j += 2
					if depth == 0 {
						break
					}
				} else {
					j++
				}
			}
			if depth != 0 {
				return nil, fmt.Errorf("toc: unterminated comment")
			}
			i = j
		case c == '\'' || ((c == 'E' || c == 'e') && i+1 < len(sql) && sql[i+1] == '\''):
			start := i
			esc := c != '\''
			if esc {
				i++
			}
			if i = quoteEnd(sql, i+1, '\'', esc); i < 0 {
				return nil, fmt.Errorf("toc: unterminated string")
			}
			toks = append(toks, Token{String, sql[start:i]})
		case c == '"':
			start := i
			if i = quoteEnd(sql, i+1, '"', false); i < 0 {
				return nil, fmt.Errorf("toc: unterminated quoted identifier")
			}
			toks = append(toks, Token{Quoted, sql[start:i]})
		case c == '$' && dollarTag(sql[i:]) != "":
			tag := dollarTag(sql[i:])
			end := strings.Index(sql[i+len(tag):], tag)
			if end < 0 {
				return nil, fmt.Errorf("toc: unterminated dollar quote")
			}
			n := len(tag) + end + len(tag)
			toks = append(toks, Token{String, sql[i : i+n]})
			i += n
		case isWordStart(c):
			start := i
			for i < len(sql) && isWordChar(sql[i]) {
				i++
			}
			toks = append(toks, Token{Word, sql[start:i]})
		case c >= '0' && c <= '9':
			start := i
			for i < len(sql) && (isWordChar(sql[i]) || sql[i] == '.') {
				i++
			}
			toks = append(toks, Token{Number, sql[start:i]})
		case strings.IndexByte("(),.;[]:", c) >= 0:
			toks = append(toks, Token{Punct, sql[i : i+1]})
			i++
		default:
			start := i
			for i < len(sql) && strings.IndexByte("+-*/<>=~!@#%^&|`?", sql[i]) >= 0 {
				i++
			}
			if i == start {
				i++
			}
			toks = append(toks, Token{Punct, sql[start:i]})
		}
	}
	return toks, nil
}

// quoteEnd returns the index just past the quote q that closes a string or
// quoted identifier whose text starts at i, or -1 when none closes it. A
// doubled quote stands for itself; with backslash (an E'...' string) a
// backslash escapes the byte after it.
func quoteEnd(sql string, i int, q byte, backslash bool) int {
	for i < len(sql) {
		switch {
		case backslash && sql[i] == '\\':
			i += 2
		case sql[i] == q && i+1 < len(sql) && sql[i+1] == q:
			i += 2
		case sql[i] == q:
			return i + 1
		default:
			i++
		}
	}
	return -1
}

func isWordStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func isWordChar(c byte) bool { return isWordStart(c) || (c >= '0' && c <= '9') || c == '$' }

// dollarTag returns the opening $tag$ at the start of s, or "".
func dollarTag(s string) string {
	for j := 1; j < len(s); j++ {
		if s[j] == '$' {
			return s[:j+1]
		}
		if !isWordChar(s[j]) || s[j] == '$' || (j == 1 && s[j] >= '0' && s[j] <= '9') {
			return ""
		}
	}
	return ""
}

// Statement is one SQL statement: its text (ending in ';') and tokens.
type Statement struct {
	Text   string
	Tokens []Token
}

// Statements splits an entry's SQL into statements at top-level
// semicolons.
func Statements(sql string) ([]Statement, error) {
	toks, err := Tokenize(sql)
	if err != nil {
		return nil, err
	}
	var out []Statement
	var cur []Token
	for _, t := range toks {
		cur = append(cur, t)
		if t.Kind == Punct && t.Text == ";" {
			out = append(out, Statement{Tokens: cur})
			cur = nil
		}
	}
	if len(cur) > 0 {
		return nil, fmt.Errorf("toc: statement without a terminating semicolon")
	}
	// Recover each statement's text by cutting the source at the
	// terminating semicolons' positions.
	rest := sql
	for i := range out {
		n, err := statementEnd(rest)
		if err != nil {
			return nil, err
		}
		out[i].Text = strings.TrimSpace(rest[:n])
		rest = rest[n:]
	}
	return out, nil
}

// statementEnd returns the length of the first statement of s, through its
// semicolon, by tokenizing growing prefixes' ends: the first ';' token.
func statementEnd(s string) (int, error) {
	for i := 0; i < len(s); i++ {
		if s[i] != ';' {
			continue
		}
		toks, err := Tokenize(s[:i+1])
		if err != nil {
			continue // the ';' is inside a string or identifier
		}
		if n := len(toks); n > 0 && toks[n-1].Kind == Punct && toks[n-1].Text == ";" {
			semis := 0
			for _, t := range toks {
				if t.Kind == Punct && t.Text == ";" {
					semis++
				}
			}
			if semis == 1 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("toc: statement without a terminating semicolon")
}

// Join renders tokens back to SQL with single spaces where needed.
func Join(toks []Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && needSpace(toks[i-1], t) {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
	}
	return b.String()
}

func needSpace(a, b Token) bool {
	if b.Kind == Punct && (b.Text == "," || b.Text == ")" || b.Text == "." || b.Text == ";" || b.Text == "(" && a.Kind != Word) {
		return false
	}
	if a.Kind == Punct && (a.Text == "(" || a.Text == ".") {
		return false
	}
	return true
}

// AlteredTable returns the table an "ALTER TABLE [ONLY] [IF EXISTS]
// schema.name ..." statement alters, unquoted: the table a foreign key
// belongs to, in pg_dump's SQL.
func AlteredTable(sql string) (schema, name string, ok bool) {
	toks, err := Tokenize(sql)
	if err != nil {
		return "", "", false
	}
	i := 0
	word := func(w string) bool {
		if i < len(toks) && toks[i].Kind == Word && strings.EqualFold(toks[i].Text, w) {
			i++
			return true
		}
		return false
	}
	if !word("ALTER") || !word("TABLE") {
		return "", "", false
	}
	word("ONLY")
	if word("IF") && !word("EXISTS") {
		return "", "", false
	}
	if i+2 >= len(toks) || !toks[i].IsIdent() || toks[i+1].Text != "." || !toks[i+2].IsIdent() {
		return "", "", false
	}
	return toks[i].Ident(), toks[i+2].Ident(), true
}
