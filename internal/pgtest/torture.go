package pgtest

import (
	"context"
	_ "embed" // for tortureSQL
	"testing"
	"time"
)

// tortureSQL is embedded rather than read from disk so that tests of other
// packages (whose working directory is their own package dir) and binaries
// built with -trimpath can load it. It is only ever read.
//
//go:embed testdata/torture.sql
var tortureSQL string

// TortureSQL returns the psql script of testdata/torture.sql: a database with
// odd names, every common type and edge value, TOAST-sized values,
// partitioning, inheritance, RLS, triggers, views, privileges, extensions and
// large objects. It exists for tests that need the text itself (e.g. to load
// it with a different client); most should call LoadTorture.
func TortureSQL() string { return tortureSQL }

// LoadTorture loads the torture script into the existing, empty database db
// of c as the superuser, with psql and ON_ERROR_STOP, failing the test on the
// first error. Several databases of one cluster may be loaded concurrently.
func LoadTorture(t testing.TB, c *Instance, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.ExecPsql(ctx, db, tortureSQL); err != nil {
		t.Fatalf("pgtest.LoadTorture into %q: %v", db, err)
	}
}
