package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// The bank workload (accounts, a ledger, transfers, the check that a copy
// is of one instant) is pgtest's: StartTransfers, CheckBank, BankSQL.

// newBank starts a cluster with database "bank": the accounts and ledger,
// plus a filler table of fillerRows rows the workers reach first (largest
// first), so that the small tables are read well after the snapshot.
func newBank(t *testing.T, fillerRows int) *pgtest.Instance {
	t.Helper()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "bank"); err != nil {
		t.Fatal(err)
	}
	err := c.Exec(ctx, "bank", pgtest.BankSQL+fmt.Sprintf(`
CREATE TABLE filler AS SELECT i, md5(i::text) || md5((i+1)::text) AS pad FROM generate_series(1, %d) i;
ANALYZE;`, fillerRows))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
