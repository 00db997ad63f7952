package pg

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// Ident quotes one identifier, always, so hostile names are safe in SQL.
func Ident(name string) string {
	return pgx.Identifier{name}.Sanitize()
}

// Qualified quotes schema.name.
func Qualified(schema, name string) string {
	return pgx.Identifier{schema, name}.Sanitize()
}

// CopyColumns returns " (a, b, c)" for a COPY column list, or "" for a
// table without columns, where COPY takes no list (each row is an empty line).
func CopyColumns(cols []string) string {
	if len(cols) == 0 {
		return ""
	}
	return " (" + ColumnList(cols) + ")"
}

// ColumnList quotes and joins column names for a select list.
func ColumnList(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = Ident(c)
	}
	return strings.Join(q, ", ")
}

// Literal quotes a string as an SQL literal (standard_conforming_strings on).
func Literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// SubsetSetting is the database setting (ALTER DATABASE ... SET) a restore
// or clone of a subset archive leaves in its target, holding the subset's
// rules (archive.Subset.Describe): compare reads it to say that the
// copy's tables hold fewer rows by design. A custom setting is invisible
// to pg_dump without --create, so the schemas still compare equal.
const SubsetSetting = "pgsprint.subset"

// MaskSetting is the database setting a restore or clone of a masked
// archive leaves in its target, holding the manifest's masking record
// (archive.Mask, as JSON: every masked column and its rule, never the
// secret): compare reads it to say that the masked tables' values differ
// by design.
const MaskSetting = "pgsprint.masked"

// CutOutsideQuotes cuts s around the first sep that is not inside double
// quotes, as strings.Cut does: the rule syntaxes that name relations
// (--subset, --subset-ref, --mask) separate the name from the rest with a
// character a quoted identifier may hold.
func CutOutsideQuotes(s string, sep byte) (before, after string, found bool) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
