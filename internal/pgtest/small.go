package pgtest

import (
	"fmt"
	"strings"
)

// SmallTableRows is the number of rows in each of SmallTables' tables.
const SmallTableRows = 5

// smallBatch is how many of SmallTables' tables one transaction creates:
// each takes a few lock slots (table, TOAST table and index, its indexes),
// and a transaction's locks must fit the shared lock table at default
// settings (max_locks_per_transaction 64 times max_connections 100).
const smallBatch = 250

// SmallTableName is the name of SmallTables' table number i (1-based).
func SmallTableName(i int) string { return fmt.Sprintf("small_%06d", i) }

// SmallTables is the SQL that creates n tiny tables in schema public, as
// schema-per-tenant and ORM-generated databases have them: each with
// SmallTableRows rows, a primary key and one secondary index, every third
// one also a foreign key to the table before it. Copying them is all fixed
// cost per table (catalog entries, locks, COPY setup, index builds,
// ANALYZE): the many-tables test and benchmark build them. Each statement
// is one transaction of up to smallBatch tables.
func SmallTables(n int) []string {
	var out []string
	for lo := 1; lo <= n; lo += smallBatch {
		var b strings.Builder
		b.WriteString("BEGIN;\n")
		for i := lo; i < lo+smallBatch && i <= n; i++ {
			t := SmallTableName(i)
			fmt.Fprintf(&b, "CREATE TABLE %s (id int PRIMARY KEY, ref int, label text NOT NULL, created timestamptz);\n", t)
			fmt.Fprintf(&b, "INSERT INTO %s SELECT g, g, md5(g::text || '%s'), timestamptz '2024-01-01' + g * interval '1 hour' FROM generate_series(1, %d) g;\n", t, t, SmallTableRows)
			fmt.Fprintf(&b, "CREATE INDEX ON %s (label);\n", t)
			if i%3 == 0 {
				fmt.Fprintf(&b, "ALTER TABLE %s ADD FOREIGN KEY (ref) REFERENCES %s (id);\n", t, SmallTableName(i-1))
			}
		}
		b.WriteString("COMMIT;")
		out = append(out, b.String())
	}
	return out
}
