package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// smallTables is how many tables TestRoundTripManySmallTables copies: enough
// that a cost paid per table (a round trip, a transaction, a sort of every
// task) dominates and that pre-data is split (more than
// restore.Options.PreDataSplitMin's default of 200 independent tables),
// small enough for CI; 2,000 under `make test-long`. A multiple of 6: half
// the tables go to each pre-data run, a third have a foreign key.
var smallTables = pgtest.Repeat(600, 2000)

// TestRoundTripManySmallTables dumps and restores smallTables tiny tables (a
// primary key, a secondary index, a third with a foreign key:
// pgtest.SmallTables) at default server settings, where per-table costs
// add up: pg_dump's schema and every table's rows must come back equal.
func TestRoundTripManySmallTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	for _, db := range []string{"small", "back"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	for _, s := range pgtest.SmallTables(smallTables) {
		if err := c.Exec(ctx, "small", s); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d tables created in %v", smallTables, time.Since(began))
	file := filepath.Join(t.TempDir(), "small.pgs")
	began = time.Now()
	mustPgsprint(t, "dump", "-q", "-j", "2", "-d", c.ConnString("small"), "-f", file)
	t.Logf("dump in %v", time.Since(began))
	began = time.Now()
	r := mustPgsprint(t, "restore", "-v", "-j", "2", "-f", file, "-d", c.ConnString("back"))
	t.Logf("restore in %v", time.Since(began))
	// Pre-data is split (the default restore.Options.PreDataSplitMin is
	// far below smallTables): the tables, all independent, are created
	// by two pg_restore runs at once, half each.
	steps := regexp.MustCompile(`msg="pre-data step" .*runs="?\[([0-9 ]+)\]`).FindAllStringSubmatch(r.stderr, -1)
	if len(steps) != 1 || steps[0][1] != fmt.Sprintf("%d %d", smallTables/2, smallTables/2) {
		t.Errorf("pre-data steps %q, want one of two runs of %d tables each", steps, smallTables/2)
	}
	pgtest.RequireSameSchema(t, c.BinDir(), c.ConnString("small"), c.ConnString("back"))
	pgtest.RequireSameData(t, c.ConnString("small"), c.ConnString("back"))
	// Foreign keys are added NOT VALID and validated afterwards; pg_dump's
	// text does not show the difference.
	valid := `SELECT count(*) FILTER (WHERE convalidated) || '/' || count(*) FROM pg_constraint WHERE contype = 'f'`
	if want, got := fmt.Sprintf("%d/%d", smallTables/3, smallTables/3), pgtest.Scalar(t, c.ConnString("back"), valid); got != want {
		t.Errorf("restored foreign keys validated/all: %s, want %s", got, want)
	}
	// Analyzed, or given the archive's statistics (PostgreSQL 18).
	stale := fmt.Sprintf(`SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND reltuples <> %d`, pgtest.SmallTableRows)
	if got := pgtest.Scalar(t, c.ConnString("back"), stale); got != "0" {
		t.Errorf("%s restored tables have no statistics", got)
	}
}
