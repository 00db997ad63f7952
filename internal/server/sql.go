package server

import (
	"strings"
)

// splitStatements cuts a script pg_dumpall wrote into its SQL statements,
// leaving out comments and psql meta-commands (\connect, \restrict, ...).
// It knows what pg_dumpall's output holds: '...' and E'...' literals,
// "..." identifiers, -- comments, and statements ended by ";".
func splitStatements(script string) []string {
	var out []string
	var cur strings.Builder
	atLineStart := true
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case atLineStart && c == '\\' && strings.TrimSpace(cur.String()) == "":
			// A meta-command runs to the end of its line.
			for i < len(script) && script[i] != '\n' {
				i++
			}
			cur.Reset()
			continue
		case c == '-' && i+1 < len(script) && script[i+1] == '-':
			for i < len(script) && script[i] != '\n' {
				i++
			}
			atLineStart = true
			cur.WriteByte('\n')
			continue
		case c == '\'' || c == '"':
			escapes := c == '\'' && i > 0 && (script[i-1] == 'E' || script[i-1] == 'e')
			j := i + 1
			for j < len(script) {
				if escapes && script[j] == '\\' {
					j += 2
					continue
				}
				if script[j] == c {
					if j+1 < len(script) && script[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j, len(script)-1)
			cur.WriteString(script[i : j+1])
			i = j
			atLineStart = false
			continue
		case c == ';':
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, s)
			}
			cur.Reset()
			atLineStart = false
			continue
		}
		cur.WriteByte(c)
		atLineStart = c == '\n'
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// token is one word of a statement: a keyword or identifier (unquoted
// ones folded to lower case, as PostgreSQL does), a literal's value, or
// punctuation.
type token struct {
	text    string
	literal bool // a '...' string
	quoted  bool // a "..." identifier
}

// tokens splits the first words of stmt, up to n of them.
func tokens(stmt string, n int) []token {
	var out []token
	i := 0
	for i < len(stmt) && len(out) < n {
		c := stmt[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			i++
		case c == '"' || c == '\'':
			var b strings.Builder
			j := i + 1
			for j < len(stmt) {
				if stmt[j] == c {
					if j+1 < len(stmt) && stmt[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				b.WriteByte(stmt[j])
				j++
			}
			out = append(out, token{text: b.String(), literal: c == '\'', quoted: c == '"'})
			i = j + 1
		case isWordByte(c):
			j := i
			for j < len(stmt) && isWordByte(stmt[j]) {
				j++
			}
			out = append(out, token{text: strings.ToLower(stmt[i:j])})
			i = j
		default:
			out = append(out, token{text: string(c)})
			i++
		}
	}
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// words says whether ts begins with the keywords ws (unquoted).
func words(ts []token, ws ...string) bool {
	if len(ts) < len(ws) {
		return false
	}
	for i, w := range ws {
		if ts[i].quoted || ts[i].literal || ts[i].text != w {
			return false
		}
	}
	return true
}
