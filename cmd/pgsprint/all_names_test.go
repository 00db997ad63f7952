package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// latinRole and latinDB are non-ASCII names that LATIN1 can spell too,
// created (as every role and database name is stored: bytes in the shared
// catalog) from a UTF8 database.
const (
	latinRole = "rôle_ü"
	latinDB   = "dbé_lat"
)

// TestAllNonASCIINames: a LATIN1 database with a non-ASCII name, owned by
// a role with a non-ASCII name that also owns a table in it, goes through
// dump --all and restore --all, and clone --all, with its name, its
// owner's and its objects' byte for byte (pg_dumpall's globals and
// pg_dump --create of every database compared with the source's).
func TestAllNonASCIINames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := pgtest.New(t)
	for _, s := range []string{
		`CREATE ROLE "` + latinRole + `" LOGIN`,
		`CREATE DATABASE "` + latinDB + `" OWNER "` + latinRole + `" TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'`,
		`COMMENT ON DATABASE "` + latinDB + `" IS 'café'`,
	} {
		if err := src.Exec(ctx, "postgres", s); err != nil {
			t.Fatal(err)
		}
	}
	// In the LATIN1 database, the role's name (UTF8 bytes in the shared
	// catalog) reads as LATIN1: that is how a client spells it there.
	if err := src.Exec(ctx, latinDB, `SET ROLE "`+asLatin1(latinRole)+`"; CREATE TABLE "tablé" (id int PRIMARY KEY, "naïve" text);
		INSERT INTO "tablé" VALUES (1, 'été'), (2, 'noël')`); err != nil {
		t.Fatal(err)
	}
	bin := src.BinDir()
	dbs := []string{latinDB, "postgres"}
	same := func(t *testing.T, dst *pgtest.Instance) {
		t.Helper()
		want, got := pgtest.GlobalsDump(t, bin, src.ConnString("postgres")), pgtest.GlobalsDump(t, bin, dst.ConnString("postgres"))
		if pgtest.WithoutRole(got, "postgres") != pgtest.WithoutRole(want, "postgres") {
			t.Errorf("globals differ:\n%s", compare.SchemaDiff(want, got))
		}
		for _, db := range dbs {
			if d := compare.SchemaDiff(pgtest.SchemaDump(t, bin, src.ConnString(db), "--create"), pgtest.SchemaDump(t, bin, dst.ConnString(db), "--create")); d != "" {
				t.Errorf("database %s: schemas differ:\n%s", db, d)
			}
			if d := compare.FingerprintDiff(pgtest.Fingerprint(t, src.ConnString(db)), pgtest.Fingerprint(t, dst.ConnString(db))); len(d) > 0 {
				t.Errorf("database %s: data differs:\n%s", db, strings.Join(d, "\n"))
			}
		}
	}
	t.Run("dump-restore", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "server.pgs")
		mustPgsprint(t, "dump", "--all", "-d", src.ConnString("postgres"), "-f", file)
		dst := pgtest.New(t)
		mustPgsprint(t, "restore", "--all", "-f", file, "-d", dst.ConnString("postgres"), "-j", "2")
		same(t, dst)
	})
	t.Run("clone", func(t *testing.T) {
		dst := pgtest.New(t)
		mustPgsprint(t, "clone", "--all", "--source", src.ConnString("postgres"), "--target", dst.ConnString("postgres"), "-j", "2")
		same(t, dst)
	})
}

// asLatin1 is s's bytes read as LATIN1: how a database in LATIN1 shows a
// name stored in the shared catalog from a UTF8 database.
func asLatin1(s string) string {
	r := make([]rune, len(s))
	for i := range len(s) {
		r[i] = rune(s[i])
	}
	return string(r)
}
