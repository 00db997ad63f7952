package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestSubset makes development copies of a schema with composite,
// nullable, self and cyclic foreign keys, a partitioned table and a
// virtual reference (pgtest.SubsetSQL) through clone, a pipe (dump -f - |
// restore -f -) and an encrypted file: each restores with every constraint valid
// (restore validates the foreign keys), its row
// counts equal the closure pgtest.SubsetExpected computes by keys in SQL,
// list shows the archive is a subset and compare against the source
// says so and succeeds (and no longer once a whole clone --clean
// replaced the copy).
func TestSubset(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	src := pgtest.DB(t, c, "subset src")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Exec(ctx, src, pgtest.SubsetSQL()); err != nil {
		t.Fatal(err)
	}
	const recent = "created >= '2026-09-01'"
	check := func(t *testing.T, dst string, want map[string]int64, schema bool) {
		t.Helper()
		for _, tbl := range pgtest.SubsetTables {
			if got := pgtest.Scalar(t, c.ConnString(dst), "SELECT count(*) FROM ONLY "+tbl); got != strconv.FormatInt(want[tbl], 10) {
				t.Errorf("%s: %s rows, the closure in SQL %d", tbl, got, want[tbl])
			}
		}
		const fks = "SELECT count(*) FILTER (WHERE contype = 'f') || ' foreign keys, ' || count(*) FILTER (WHERE NOT convalidated) || ' not valid' FROM pg_catalog.pg_constraint WHERE connamespace = 'app'::regnamespace"
		if want, got := pgtest.Scalar(t, c.ConnString(src), fks), pgtest.Scalar(t, c.ConnString(dst), fks); got != want || !strings.HasSuffix(got, " 0 not valid") {
			t.Errorf("constraints: %s, the source %s", got, want)
		}
		args := []string{"compare", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(dst)}
		if schema {
			args = append(args, "--schema")
		}
		r := pgsprint(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "target is a development copy (subset of app.orders: "+recent) || schema && !strings.Contains(r.stdout, "schema: equal") {
			t.Errorf("compare with the source: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	t.Run("clone with children", func(t *testing.T) {
		t.Parallel()
		dst := pgtest.DB(t, c, "subset clone")
		mustPgsprint(t, "clone", "-q", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(dst),
			"--subset", "app.orders: "+recent, "--subset-children", "--subset-ref", pgtest.SubsetRef)
		check(t, dst, pgtest.SubsetExpected(t, c.ConnString(src), map[string]string{"orders": recent}, true, []string{"vip_customers", "audit", "settings"}), true)
		// A whole copy over it removes the mark: compare must not excuse
		// missing rows any more.
		mustPgsprint(t, "clone", "-q", "--clean", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(dst))
		if r := pgsprint(t, nil, "compare", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(dst)); r.code != 0 || strings.Contains(r.stdout, "development copy") {
			t.Errorf("compare after a whole clone --clean: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("pipe, others none, from a file", func(t *testing.T) {
		t.Parallel()
		dst := pgtest.DB(t, c, "subset pipe")
		rules := filepath.Join(t.TempDir(), "dev.subset")
		if err := os.WriteFile(rules, []byte("# the last days' orders\nsubset app.orders: "+recent+"\nothers none\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmds := [][]string{
			{"pgsprint", "dump", "-q", "-f", "-", "-j", "2", "-d", c.ConnString(src), "--subset-file", rules},
			{"pgsprint", "restore", "-q", "-f", "-", "-j", "2", "-d", c.ConnString(dst)},
		}
		for i, r := range runPipeline(t, cmds...) {
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", cmds[i][:2], r.code, r.stderr)
			}
		}
		check(t, dst, pgtest.SubsetExpected(t, c.ConnString(src), map[string]string{"orders": recent}, false, nil), false)
	})
	t.Run("encrypted file and list", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		key, pub, _ := writeIdentity(t, dir, "key.txt")
		file := filepath.Join(dir, "dev.pgs")
		mustPgsprint(t, "dump", "-q", "-j", "2", "-d", c.ConnString(src), "-f", file, "--encrypt-to", pub, "--subset", "app.orders: "+recent, "--subset-others", "none")
		r := mustPgsprint(t, "list", file, "--identity", key)
		if !strings.Contains(r.stdout, "subset:     development copy, subset of app.orders: "+recent+", other tables: none") {
			t.Errorf("list does not say the archive is a subset:\n%s", r.stdout)
		}
		dst := pgtest.DB(t, c, "subset file")
		mustPgsprint(t, "restore", "-q", "-j", "2", "-f", file, "--identity", key, "-d", c.ConnString(dst))
		check(t, dst, pgtest.SubsetExpected(t, c.ConnString(src), map[string]string{"orders": recent}, false, nil), false)
	})
	t.Run("usage", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"dump", "-d", c.ConnString(src), "-f", "-", "--subset-children"},
			{"dump", "-d", c.ConnString(src), "-f", "-", "--subset", "app.orders"},
			{"dump", "--all", "-f", "-", "--subset", "app.orders: true"},
			{"clone", "--source", c.ConnString(src), "--target", c.ConnString(src), "--subset", "app.orders: true", "--subset-others", "some"},
			// A subset is chosen anew by each run: its clone cannot resume.
			{"clone", "--source", c.ConnString(src), "--target", c.ConnString(src), "--subset", "app.orders: true", "--resume", "--snapshot", "00000003-00000002-1"},
		} {
			if r := pgsprint(t, nil, args...); r.code != exitUsage {
				t.Errorf("%v: exit %d, want %d: %s", args, r.code, exitUsage, r.stderr)
			}
		}
	})
}

// TestSubsetQuiet: the warning that a rule leaves a referencing table
// whole is printed, but not under -q, which prints nothing but errors.
func TestSubsetQuiet(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	src := pgtest.DB(t, c, "subset quiet")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Exec(ctx, src, pgtest.SubsetSQL()); err != nil {
		t.Fatal(err)
	}
	for _, quiet := range []bool{false, true} {
		args := []string{"dump", "-d", c.ConnString(src), "-f", filepath.Join(t.TempDir(), "s.pgs"), "--progress", "none", "--subset", "app.orders: created >= '2026-09-01'"}
		if quiet {
			args = append(args, "-q")
		}
		r := mustPgsprint(t, args...)
		warned := strings.Contains(r.stderr, "but no rule reaches it")
		if quiet && strings.TrimSpace(r.stderr) != "" || !quiet && !warned {
			t.Errorf("-q %v: stderr %q", quiet, r.stderr)
		}
	}
}
