package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
)

// PipeServerDatabases are the databases LoadPipeServer fills, with their
// rows (postgres is every server's).
var PipeServerDatabases = map[string]int64{"notes": 3, "postgres": 1, "shop": 20003}

// LoadPipeServer gives a cluster a role with a password and three small
// databases, one owned by that role with a table dumped in chunks and a
// foreign key: a whole server small enough to move several times in a
// test, through a pipe, a cut pipe or a killed clone --all.
func LoadPipeServer(t testing.TB, c *Instance) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []struct{ db, sql string }{
		{"postgres", "CREATE ROLE carol LOGIN PASSWORD 'carol-pw'"},
		{"postgres", "CREATE DATABASE shop OWNER carol"},
		{"postgres", "CREATE DATABASE notes"},
		{"postgres", "CREATE TABLE kept (id int PRIMARY KEY); INSERT INTO kept VALUES (1)"},
		{"shop", `SET ROLE carol;
			CREATE TABLE customers (id int PRIMARY KEY, name text);
			INSERT INTO customers VALUES (1, 'one'), (2, 'two'), (3, 'three');
			CREATE TABLE orders (id int PRIMARY KEY, customer int REFERENCES customers, note text);
			INSERT INTO orders SELECT g, 1 + g % 3, md5(g::text) FROM generate_series(1, 20000) g`},
		{"notes", "CREATE TABLE note (id serial PRIMARY KEY, body text); INSERT INTO note (body) VALUES ('a'), ('b'), ('c')"},
	} {
		if err := c.Exec(ctx, s.db, s.sql); err != nil {
			t.Fatalf("%s: %s: %v", s.db, s.sql, err)
		}
	}
}

// RequireSameServer compares dst with src as restore --all and clone
// --all leave it: the globals (but the bootstrap superuser's password,
// which every server has its own of), and each of dbs' pg_dump --create
// and row hashes.
func RequireSameServer(t testing.TB, src, dst *Instance, dbs map[string]int64) {
	t.Helper()
	bin := src.BinDir()
	want, got := GlobalsDump(t, bin, src.ConnString("postgres")), GlobalsDump(t, bin, dst.ConnString("postgres"))
	if WithoutRole(got, "postgres") != WithoutRole(want, "postgres") {
		t.Errorf("globals differ:\n%s", compare.SchemaDiff(want, got))
	}
	for db := range dbs {
		if d := compare.SchemaDiff(SchemaDump(t, bin, src.ConnString(db), "--create"), SchemaDump(t, bin, dst.ConnString(db), "--create")); d != "" {
			t.Errorf("database %s: schemas differ:\n%s", db, d)
		}
		if d := compare.FingerprintDiff(Fingerprint(t, src.ConnString(db)), Fingerprint(t, dst.ConnString(db))); len(d) > 0 {
			t.Errorf("database %s: data differs:\n%s", db, strings.Join(d, "\n"))
		}
	}
}
