package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// Context is a test's context: cancelled when it ends, and after five
// minutes, as a run of the binary would be. The packages that test their
// engine through its Run share it.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Config parses conn, failing the test on an error.
func Config(t testing.TB, conn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// WithConn runs f on a connection to the database at conn, closed when
// f returns (not at the test's end: a helper called in a loop must not
// pile up connections on a server of few), failing the test if it
// cannot connect.
func WithConn(t testing.TB, conn string, f func(ctx context.Context, cn *pgx.Conn)) {
	t.Helper()
	ctx := context.Background()
	cn, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	f(ctx, cn)
}

// VersionsOrSkip returns the versions the cross-version tests use,
// skipping (or failing, under make test) when fewer than min are
// installed.
func VersionsOrSkip(t testing.TB, min int) []int {
	t.Helper()
	vs := Versions()
	if len(vs) < min {
		msg := fmt.Sprintf("need %d PostgreSQL major versions, have %v (scripts/install-pg-versions.sh installs more)", min, vs)
		if os.Getenv(EnvRequire) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return vs
}

// UserObjects describes every object anyone created in the database at
// conn (pg.UserObjects, the restore's own emptiness check, which sees the
// journal schema too), up to 20, e.g. "schema pgsprint_journal".
func UserObjects(t testing.TB, conn string) []string {
	t.Helper()
	var objs []string
	WithConn(t, conn, func(ctx context.Context, cn *pgx.Conn) {
		var err error
		if _, objs, err = pg.UserObjects(ctx, cn, 20); err != nil {
			t.Fatal(err)
		}
	})
	return objs
}
