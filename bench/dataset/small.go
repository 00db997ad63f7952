package dataset

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/sample"
)

// SmallRows is the number of rows in each of Small's tables.
const SmallRows = pgtest.SmallTableRows

// Small builds n tiny tables (pgtest.SmallTables: a primary key, a
// secondary index, a third with a foreign key), then VACUUM ANALYZE:
// copying them is all fixed cost per table, which is what it measures.
func Small(ctx context.Context, connString string, n int) error {
	if n < 1 {
		return fmt.Errorf("small tables dataset: %d tables (want at least 1)", n)
	}
	return sample.ExecEach(ctx, connString, append(pgtest.SmallTables(n), "VACUUM ANALYZE")...)
}
