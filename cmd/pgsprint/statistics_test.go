package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// statsDDL has a table whose statistics pg_dump 18 carries (with an
// expression index, whose statistics are the index's), one with extended
// statistics (which it does not carry), one whose data the restore
// excludes, and a materialized view.
const statsDDL = `
CREATE TABLE stats_a (id int PRIMARY KEY, grp int, note text);
CREATE INDEX stats_a_lower ON stats_a (lower(note));
INSERT INTO stats_a SELECT g, g % 17, 'note ' || (g % 301) FROM generate_series(1, 5000) g;
CREATE TABLE stats_b (x int, y int);
CREATE STATISTICS stats_b_xy ON x, y FROM stats_b;
INSERT INTO stats_b SELECT g % 10, g % 20 FROM generate_series(1, 2000) g;
CREATE TABLE stats_c (v int);
INSERT INTO stats_c SELECT g FROM generate_series(1, 1000) g;
CREATE MATERIALIZED VIEW stats_mv AS SELECT grp, count(*) AS n FROM stats_a GROUP BY grp;
ANALYZE;
`

// TestRestoreStatistics dumps from PostgreSQL 18 (optimizer statistics in
// the archive) and restores into 18: a table's pg_stats rows (and its
// indexes') and its pg_class estimates equal the source's, and it is not
// analyzed; a table with extended statistics is analyzed instead, and one
// whose data is left out gets no statistics; --no-statistics analyzes
// everything; an older target is analyzed too.
func TestRestoreStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin18, err := pgtest.BinDirFor(18)
	if err != nil {
		t.Skipf("statistics need PostgreSQL 18: %v", err)
	}
	// No autovacuum: it would analyze behind the test's back.
	quiet := map[string]string{"autovacuum": "off"}
	c := pgtest.New(t, pgtest.Options{BinDir: bin18, Settings: quiet})
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.ExecPsql(ctx, "src", statsDDL); err != nil {
		t.Fatal(err)
	}
	src := c.ConnString("src")
	file := filepath.Join(t.TempDir(), "stats.pgs")
	mustPgsprint(t, "dump", "-d", src, "-f", file, "-q")

	stats := func(conn, rel string) string {
		return pgtest.Scalar(t, conn, "SELECT coalesce(string_agg(s::text, E'\\n' ORDER BY s.tablename, s.attname, s.inherited), '') FROM pg_stats s WHERE s.tablename IN ('"+rel+"', '"+rel+"_lower')")
	}
	estimates := func(conn, rel string) string {
		return pgtest.Scalar(t, conn, "SELECT string_agg(relname || ' ' || relpages || ' ' || reltuples, ', ' ORDER BY relname) FROM pg_class WHERE relname LIKE '"+rel+"%'")
	}
	analyzed := func(conn, rel string) string {
		return pgtest.Scalar(t, conn, "SELECT analyze_count || ' ' || (last_analyze IS NOT NULL) FROM pg_stat_user_tables WHERE relname = '"+rel+"'")
	}

	if err := c.CreateDB(ctx, "dst"); err != nil {
		t.Fatal(err)
	}
	dst := c.ConnString("dst")
	mustPgsprint(t, "restore", "-f", file, "-d", dst, "-j", "2", "-q", "--exclude-table-data", "stats_c")
	if got, want := stats(dst, "stats_a"), stats(src, "stats_a"); got != want || want == "" {
		t.Errorf("pg_stats of stats_a differ:\n%s\nwant:\n%s", got, want)
	}
	if got, want := estimates(dst, "stats_a"), estimates(src, "stats_a"); got != want {
		t.Errorf("pg_class estimates differ: %s, want %s", got, want)
	}
	if got := analyzed(dst, "stats_a"); got != "0 false" {
		t.Errorf("stats_a: analyze_count, analyzed = %s, want 0 false: its statistics were restored", got)
	}
	if got, want := stats(dst, "stats_mv"), stats(src, "stats_mv"); got != want || want == "" {
		t.Errorf("pg_stats of stats_mv differ:\n%s\nwant:\n%s", got, want)
	}
	if got := analyzed(dst, "stats_b"); got != "1 true" {
		t.Errorf("stats_b (extended statistics): analyze_count, analyzed = %s, want 1 true", got)
	}
	if n := pgtest.Scalar(t, dst, "SELECT count(*) FROM pg_statistic_ext_data"); n != "1" {
		t.Errorf("%s extended statistics built, want 1", n)
	}
	// Not loaded, so neither its statistics nor ANALYZE (which the
	// restore runs for loaded tables only).
	if got := estimates(dst, "stats_c") + " " + stats(dst, "stats_c"); got != "stats_c 0 -1 " {
		t.Errorf("stats_c (data excluded): estimates and pg_stats %q: the source's statistics were restored on an empty table", got)
	}

	t.Run("--no-statistics", func(t *testing.T) {
		if err := c.CreateDB(ctx, "nostats"); err != nil {
			t.Fatal(err)
		}
		db := c.ConnString("nostats")
		mustPgsprint(t, "restore", "-f", file, "-d", db, "-q", "--no-statistics")
		if got := analyzed(db, "stats_a"); got != "1 true" {
			t.Errorf("stats_a: analyze_count, analyzed = %s, want 1 true", got)
		}
	})
	t.Run("into PostgreSQL 17", func(t *testing.T) {
		bin17, err := pgtest.BinDirFor(17)
		if err != nil {
			t.Skipf("no PostgreSQL 17: %v", err)
		}
		c17 := pgtest.New(t, pgtest.Options{BinDir: bin17, Settings: quiet})
		if err := c17.CreateDB(ctx, "dst"); err != nil {
			t.Fatal(err)
		}
		db := c17.ConnString("dst")
		mustPgsprint(t, "restore", "-f", file, "-d", db, "-q")
		if got := analyzed(db, "stats_a"); got != "1 true" {
			t.Errorf("stats_a: analyze_count, analyzed = %s, want 1 true", got)
		}
		pgtest.RequireData(t, src, db, "public.stats_a", "public.stats_b")
	})
}
