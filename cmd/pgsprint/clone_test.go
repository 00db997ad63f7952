package main

import (
	"context"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestCloneConsistencyUnderWrites clones while transfers move money
// between accounts: the target must hold the original total and every
// account must agree with the ledger, i.e. all tables come from one
// instant of the source.
func TestCloneConsistencyUnderWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newBank(t, 300000)
	bank := pgtest.StartTransfers(t, c.ConnString("bank"), 3)
	time.Sleep(300 * time.Millisecond)
	if err := c.CreateDB(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	before := bank.Count()
	mustPgsprint(t, "clone", "-q", "--source", c.ConnString("bank"), "--target", c.ConnString("copy"), "-j", "2", "--chunk-size", "16MB")
	during := bank.Count() - before
	bank.Stop()
	if during == 0 {
		t.Fatal("no transfer ran during the clone: the test proves nothing")
	}
	t.Logf("%d transfers committed while the clone ran", during)
	pgtest.CheckBank(t, c.ConnString("copy"), "cloned bank")
}
