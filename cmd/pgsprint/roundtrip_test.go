package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/verify"
)

// TestRoundTripTorture dumps the torture database with every codec and
// restores each archive into a fresh database: pg_dump's schema text and
// every table's row count and content hash must be identical.
func TestRoundTripTorture(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	const src = `src "db" ünï`
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	pgtest.LoadTorture(t, c, src)
	dir := t.TempDir()

	for _, tc := range []struct {
		codec string
		jobs  string
	}{
		{"zstd", "3"},
		{"lz4:9", "2"},
		{"gzip:1", "1"},
		{"none", "4"},
	} {
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
			dst := "dst " + tc.codec
			if err := c.CreateDB(ctx, dst); err != nil {
				t.Fatal(err)
			}
			mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString(dst), "-j", tc.jobs, "-q")
			pgtest.RequireSameSchema(t, c.BinDir(), c.ConnString(src), c.ConnString(dst))
			pgtest.RequireSameData(t, c.ConnString(src), c.ConnString(dst))
		})
	}

	t.Run("clean over an existing copy", func(t *testing.T) {
		file := filepath.Join(dir, "zstd.pgs")
		dst := "dst zstd"
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString(dst))
		if r.code == 0 {
			t.Fatal("restore into a non-empty database succeeded without --clean")
		}
		mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString(dst), "--clean", "-q")
		pgtest.RequireSameSchema(t, c.BinDir(), c.ConnString(src), c.ConnString(dst))
		pgtest.RequireSameData(t, c.ConnString(src), c.ConnString(dst))
	})

	t.Run("create", func(t *testing.T) {
		// --create makes the archived database itself, so drop the source
		// first (after fingerprinting it) and let restore bring it back.
		file := filepath.Join(dir, "zstd.pgs")
		schema := pgtest.SchemaDump(t, c.BinDir(), c.ConnString(src))
		data := pgtest.Fingerprint(t, c.ConnString(src))
		if err := c.Exec(ctx, "postgres", "DROP DATABASE "+pg.Ident(src)); err != nil {
			t.Fatal(err)
		}
		mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("postgres"), "--create", "-q")
		if got := pgtest.SchemaDump(t, c.BinDir(), c.ConnString(src)); verify.SchemaDiff(schema, got) != "" {
			t.Fatalf("schema after --create differs:\n%s", verify.SchemaDiff(schema, got))
		}
		if diff := verify.FingerprintDiff(data, pgtest.Fingerprint(t, c.ConnString(src))); len(diff) > 0 {
			t.Fatalf("data after --create differs: %v", diff)
		}
	})
}
