// Package filter selects schemas and tables the way pg_dump's -n/-N/-t/-T
// do: the same pattern language (psql's processSQLNamePattern), matched
// against the catalog with the same anchored regular expressions, so that
// pgsprint's data and pg_dump's schema always cover the same tables.
package filter

import (
	"fmt"
	"strings"
	"unicode"
)

// Pattern is one name pattern turned into anchored POSIX regular
// expressions. Schema is empty when the pattern had no schema part: then
// it matches relations visible in the search path, as in pg_dump.
type Pattern struct {
	Text   string // as the user wrote it
	Schema string
	Name   string
	// Database is the first part of a three-part name (db.schema.table),
	// which pg_dump accepts only when it names the database being dumped.
	Database string
}

// Parse converts a pattern as psql's processSQLNamePattern does with
// force_escape off: unquoted letters fold to lower case, "..." keeps case
// and makes every character literal ("" is a quote), * is .*, ? is .,
// $ is always literal, an unquoted dot separates schema from name, and
// other regular expression characters outside quotes pass through.
func Parse(text string) (Pattern, error) {
	parts := []*strings.Builder{{}}
	cur := parts[0]
	inQuotes := false
	rs := []rune(text)
	for i := 0; i < len(rs); i++ {
		ch := rs[i]
		switch {
		case ch == '"':
			if inQuotes && i+1 < len(rs) && rs[i+1] == '"' {
				cur.WriteRune('"')
				i++
			} else {
				inQuotes = !inQuotes
			}
		case !inQuotes && ch < unicode.MaxASCII && unicode.IsUpper(ch):
			cur.WriteRune(unicode.ToLower(ch))
		case !inQuotes && ch == '*':
			cur.WriteString(".*")
		case !inQuotes && ch == '?':
			cur.WriteByte('.')
		case !inQuotes && ch == '.':
			cur = &strings.Builder{}
			parts = append(parts, cur)
		case ch == '$':
			cur.WriteString(`\$`)
		default:
			if inQuotes && strings.ContainsRune(`|*+?()[]{}.^$\`, ch) {
				cur.WriteByte('\\')
			} else if ch == '[' && i+1 < len(rs) && rs[i+1] == ']' {
				cur.WriteByte('\\')
			}
			cur.WriteRune(ch)
		}
	}
	p := Pattern{Text: text}
	switch len(parts) {
	case 1:
		p.Name = anchor(parts[0].String())
	case 2:
		p.Schema, p.Name = anchor(parts[0].String()), anchor(parts[1].String())
	case 3:
		p.Database = anchor(parts[0].String())
		p.Schema, p.Name = anchor(parts[1].String()), anchor(parts[2].String())
	default:
		return p, fmt.Errorf("improper qualified name (too many dotted names): %s", text)
	}
	return p, nil
}

// ParseSchema converts a schema pattern (-n/-N): the whole text is the
// schema's name pattern.
func ParseSchema(text string) (Pattern, error) {
	p, err := Parse(text)
	if err != nil {
		return p, err
	}
	switch {
	case p.Database != "":
		return p, fmt.Errorf("improper qualified name (too many dotted names): %s", text)
	case p.Schema != "": // db.schema
		p.Database, p.Schema, p.Name = p.Schema, p.Name, ""
	default:
		p.Schema, p.Name = p.Name, ""
	}
	return p, nil
}

// parse converts a schema pattern (-n/-N) when schema is set, else a
// table pattern: the lists hold both kinds.
func parse(text string, schema bool) (Pattern, error) {
	if schema {
		return ParseSchema(text)
	}
	return Parse(text)
}

func anchor(re string) string { return "^(" + re + ")$" }
