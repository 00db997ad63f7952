package pg

import (
	"fmt"
	"strings"
)

// Copy is one COPY statement between a table and the client, in either
// direction: dump and clone read chunks with To, restore, clone's target
// side and restore --to-sql load them with From. One builder, so that both
// directions quote names, list columns and name the format and encoding
// alike (a chunk read with one column list and loaded with another would
// put values in the wrong columns).
type Copy struct {
	// Schema and Table name the table, unquoted: they are quoted here.
	Schema, Table string
	// Columns are unquoted, in COPY order (generated columns left out);
	// none means COPY takes no list (a table without columns, whose rows
	// are empty lines).
	Columns []string
	// Query, when set, is what To reads instead of the whole table: a
	// chunk's SELECT (chunk.SelectSQL). From ignores it.
	Query string
	// Binary is COPY's binary format (between servers of one major
	// version); Encoding, the text's encoding, does not apply to it.
	Binary bool
	// Encoding names the encoding of text data (COPY's ENCODING option):
	// the source's server encoding, which the target converts from.
	// Empty leaves the connection's client_encoding in charge.
	Encoding string
	// Freeze loads rows already frozen (COPY FROM only; the table must
	// have been created or truncated in the same transaction).
	Freeze bool
}

// To is the COPY ... TO STDOUT statement that reads the table or Query.
func (c Copy) To() string {
	if c.Query != "" {
		return fmt.Sprintf("COPY (%s) TO STDOUT%s", c.Query, c.with(false))
	}
	return fmt.Sprintf("COPY %s%s TO STDOUT%s", Qualified(c.Schema, c.Table), CopyColumns(c.Columns), c.with(false))
}

// From is the COPY ... FROM STDIN statement that loads the table.
func (c Copy) From() string {
	return fmt.Sprintf("COPY %s%s FROM STDIN%s", Qualified(c.Schema, c.Table), CopyColumns(c.Columns), c.with(true))
}

// with is the statement's WITH (...) clause, or "" without options.
func (c Copy) with(from bool) string {
	var opts []string
	switch {
	case c.Binary:
		opts = append(opts, "FORMAT binary")
	case c.Encoding != "":
		opts = append(opts, "ENCODING "+Literal(c.Encoding))
	}
	if from && c.Freeze {
		opts = append(opts, "FREEZE")
	}
	if len(opts) == 0 {
		return ""
	}
	return " WITH (" + strings.Join(opts, ", ") + ")"
}
