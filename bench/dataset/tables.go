package dataset

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/sample"
)

// tablesPerBlock is how many tables one DO block of Tables creates: one
// transaction each, whose locks (five relations a table) stay within a
// default server's lock table.
const tablesPerBlock = 500

// Tables builds n tables t1..tn of SmallRows rows each, shaped as Small's
// (a primary key, a secondary index, a foreign key to the table before in
// every third), with one DO block per tablesPerBlock tables instead of a
// statement each: 10,000 tables in well under a minute. It measures what a
// dump adds to pg_dump --schema-only where every table's data is tiny
// (issue 43: the data should hide behind the schema pass).
func Tables(ctx context.Context, connString string, n int) error {
	if n < 1 {
		return fmt.Errorf("tables dataset: %d tables (want at least 1)", n)
	}
	var stmts []string
	for lo := 1; lo <= n; lo += tablesPerBlock {
		hi := min(lo+tablesPerBlock-1, n)
		stmts = append(stmts, fmt.Sprintf(`DO $$
BEGIN
	FOR i IN %d..%d LOOP
		EXECUTE format('CREATE TABLE %%I (id int PRIMARY KEY, ref int, label text NOT NULL, created timestamptz)', 't' || i);
		EXECUTE format('INSERT INTO %%I SELECT g, g, md5(g::text || %%L), timestamptz ''2024-01-01'' + g * interval ''1 hour'' FROM generate_series(1, %d) g', 't' || i, 't' || i);
		EXECUTE format('CREATE INDEX ON %%I (label)', 't' || i);
		IF i %% 3 = 0 THEN
			EXECUTE format('ALTER TABLE %%I ADD FOREIGN KEY (ref) REFERENCES %%I (id)', 't' || i, 't' || (i - 1));
		END IF;
	END LOOP;
END $$`, lo, hi, SmallRows))
	}
	return sample.ExecEach(ctx, connString, append(stmts, "VACUUM ANALYZE")...)
}
