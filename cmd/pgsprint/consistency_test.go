package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestConsistencyUnderWrites dumps while transfers run (bank_test.go): the
// restored copy must be the bank at one instant.
func TestConsistencyUnderWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newBank(t, 400000)
	bank := pgtest.StartTransfers(t, c.ConnString("bank"), 4)
	time.Sleep(300 * time.Millisecond)
	before := bank.Count()
	file := filepath.Join(t.TempDir(), "bank.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("bank"), "-f", file, "-j", "2", "-q")
	during := bank.Count() - before
	bank.Stop()
	if during == 0 {
		t.Fatal("no transfer ran during the dump: the test proves nothing")
	}
	t.Logf("%d transfers committed while the dump ran", during)

	if err := c.CreateDB(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("copy"), "-q")
	pgtest.CheckBank(t, c.ConnString("copy"), "restored bank")
}
