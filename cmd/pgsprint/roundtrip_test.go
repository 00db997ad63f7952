package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestRoundTripTorture dumps the torture database with every codec and
// restores each archive into a fresh database: pg_dump's schema text and
// every table's row count and content hash must be identical. `make test`
// runs zstd (the default; pre-data split over -j 3); gzip (one job,
// pre-data whole), lz4 and none join it under `make test-long` (each
// codec's streams are internal/codec's and internal/archive's tests, and
// other tests of the binary restore with pre-data whole).
func TestRoundTripTorture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Shared(t)
	src := pgtest.TortureDB(t, c, `src "db" ünï`)
	dir := t.TempDir()

	// preDataSplit forces pre-data's split over -j pg_restore runs
	// (restore.Options.PreDataSplitMin) on the torture schema, which is
	// too small to be split by default: both ways must restore it exactly.
	preDataSplit := []string{"--pre-data-split-min", "1"}
	dsts := map[string]string{} // codec: its target database
	for _, tc := range []struct {
		codec    string
		jobs     string
		split    bool
		longOnly bool // only under `make test-long`
	}{
		{"zstd", "3", true, false},
		{"lz4:9", "2", false, true},
		{"gzip:1", "1", false, true},
		{"none", "4", true, true},
	} {
		if tc.longOnly && !long {
			continue
		}
		dst := pgtest.DB(t, c, "dst "+tc.codec) // the test's: "clean" below restores over zstd's
		t.Run(tc.codec, func(t *testing.T) {
			file := filepath.Join(dir, tc.codec+".pgs")
			mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", file, "-j", tc.jobs, "-Z", tc.codec, "-q")
			st, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("archive mode %v, want 0600", st.Mode().Perm())
			}
			args := []string{"restore", "-f", file, "-d", c.ConnString(dst), "-j", tc.jobs, "-q"}
			if tc.split {
				args = append(args, preDataSplit...)
			}
			mustPgsprint(t, args...)
			pgtest.RequireTorture(t, c, c.ConnString(dst))
			requireSameValidity(t, c.ConnString(src), c.ConnString(dst))
			dsts[tc.codec] = dst
		})
	}

	t.Run("to-sql loads with psql alone", func(t *testing.T) {
		file := filepath.Join(dir, "zstd.pgs")
		r := mustPgsprint(t, "restore", "-f", file, "--to-sql")
		script := filepath.Join(dir, "torture.sql")
		if err := os.WriteFile(script, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := pgtest.DB(t, c, "dst from sql")
		out, err := exec.Command(filepath.Join(c.BinDir(), "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
			"-d", c.ConnString(dst), "-f", script).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		pgtest.RequireTorture(t, c, c.ConnString(dst))
		requireSameValidity(t, c.ConnString(src), c.ConnString(dst))
	})

	t.Run("clean over an existing copy", func(t *testing.T) {
		file := filepath.Join(dir, "zstd.pgs")
		dst := dsts["zstd"]
		if dst == "" {
			t.Skip("the zstd case did not run")
		}
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString(dst))
		if r.code == 0 {
			t.Fatal("restore into a non-empty database succeeded without --clean")
		}
		mustPgsprint(t, append([]string{"restore", "-f", file, "-d", c.ConnString(dst), "--clean", "-j", "2", "-q"}, preDataSplit...)...)
		pgtest.RequireTorture(t, c, c.ConnString(dst))
	})

	t.Run("create", func(t *testing.T) {
		// --create makes the archived database itself, so drop the source
		// first and let restore bring it back.
		file := filepath.Join(dir, "zstd.pgs")
		if err := c.Exec(ctx, "postgres", "DROP DATABASE "+pg.Ident(src)); err != nil {
			t.Fatal(err)
		}
		mustPgsprint(t, append([]string{"restore", "-f", file, "-d", c.ConnString("postgres"), "--create", "-j", "2", "-q"}, preDataSplit...)...)
		pgtest.RequireTorture(t, c, c.ConnString(src))
	})
}

// requireSameValidity checks that every constraint is exactly as validated
// as in the source: the restore adds foreign keys NOT VALID and validates
// them afterwards, and pg_dump's text does not show the difference. Only
// constraints NOT VALID in the source may be so after the restore, and the
// source must have one for the check to mean something.
func requireSameValidity(t *testing.T, src, dst string) {
	t.Helper()
	read := func(connString string) map[string]bool {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, connString)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT c.conrelid::regclass::text || ' ' || c.conname || ' ' || c.contype::text, c.convalidated
			FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_namespace n ON n.oid = c.connamespace
			WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')`)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		var name string
		var valid bool
		if _, err := pgx.ForEachRow(rows, []any{&name, &valid}, func() error { got[name] = valid; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, got := read(src), read(dst)
	var invalid []string
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("constraint %s: validated %v after restore, %v in the source", name, g, v)
		}
		if !v {
			invalid = append(invalid, name)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d constraints after restore, %d in the source", len(got), len(want))
	}
	if len(invalid) != 1 || !strings.Contains(invalid[0], "orders_price_not_huge") {
		t.Errorf("source constraints NOT VALID: %v, want the torture schema's orders_price_not_huge", invalid)
	}
}
