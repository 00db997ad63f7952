package dataset

import (
	"context"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDatasets builds every dataset at a tiny scale and checks the shape
// the benchmarks promise (tables, foreign keys, indexes). Under make
// test-long only: the datasets are the benchmarks' (bench/), not
// pgsprint's, and a broken one also fails the benchmark that builds it.
func TestDatasets(t *testing.T) {
	if !pgtest.Long {
		t.Skip("under make test-long only: the benchmarks' datasets")
	}
	ctx := context.Background()
	c := pgtest.New(t)
	for _, tc := range []struct {
		db                 string
		build              func(conn string) error
		tables, fks, index int
		tool               string // a program the build needs, skipped without it
	}{
		{"pgbench", func(conn string) error { return Pgbench(ctx, c.BinDir(), conn, 1, 0) }, 4, 0, 3, ""},
		{"pgbench_parts", func(conn string) error { return Pgbench(ctx, c.BinDir(), conn, 1, 3) }, 4 + 3, 0, 3 + 3, ""},
		{"mixed", func(conn string) error { return MixedJobs(ctx, conn, 0.001, 2) }, 3, 0, 13, ""},
		{"tpch", func(conn string) error { return TPCH(ctx, "tpchgen-cli", t.TempDir(), conn, 0.01, 2) }, 8, 8, 8 + 11, "tpchgen-cli"},
		{"many", func(conn string) error { return Many(ctx, conn, 0.001) }, 60, 0, 63, ""},
		{"fkheavy", func(conn string) error { return FKHeavy(ctx, conn, 0.01) }, 24, 30, 60, ""},
		{"small", func(conn string) error { return Small(ctx, conn, 300) }, 300, 100, 600, ""},
	} {
		t.Run(tc.db, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); tc.tool != "" && err != nil {
				t.Skipf("%s is not installed (make bench-deps)", tc.tool)
			}
			if err := c.CreateDB(ctx, tc.db); err != nil {
				t.Fatal(err)
			}
			if err := tc.build(c.ConnString(tc.db)); err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, c.ConnString(tc.db))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var tables, fks, indexes, empty int
			err = conn.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r','p')),
				(SELECT count(*) FROM pg_constraint WHERE contype = 'f'),
				(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('i','I')),
				(SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.reltuples = 0)`).
				Scan(&tables, &fks, &indexes, &empty)
			if err != nil {
				t.Fatal(err)
			}
			if tables != tc.tables || fks != tc.fks || indexes != tc.index {
				t.Errorf("tables=%d fks=%d indexes=%d, want %d %d %d", tables, fks, indexes, tc.tables, tc.fks, tc.index)
			}
			if empty > 1 { // pgbench_history starts empty
				t.Errorf("%d tables without rows", empty)
			}
		})
	}
}
