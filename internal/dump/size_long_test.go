//go:build long

package dump

import (
	"context"
	"testing"

	"github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestArchiveSizeLong compares archive sizes with pg_dump -Fc's at the
// sizes of issue 34: 100,000 large objects of 100 bytes and 10,000
// five-row tables at most as large as pg_dump's; pgbench and a mixed
// database reported.
func TestArchiveSizeLong(t *testing.T) {
	checkSizes(t, []sizeCase{
		{name: "los", build: tinyLargeObjects(100000), most: 1.0},
		{name: "tables", build: smallTables(10000), most: 1.0},
		{name: "pgbench", build: func(ctx context.Context, c *pgtest.Instance, db string) error {
			return dataset.Pgbench(ctx, c.BinDir(), c.ConnString(db), 1, 0)
		}},
		{name: "mixed", build: mixed},
	})
}
