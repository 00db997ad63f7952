package pgtest

// The source and target of the --keep-going tests (restore's, clone's and
// the binary's), and the checks of what such a run restored.

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// keepGoingSchema is a small schema with each kind of thing a development
// server often lacks: an ICU collation, lz4 TOAST compression, an
// extension (pgcrypto, which the PyPI build of PostgreSQL 18 does not
// carry), a tablespace and a role; with tables that need them, tables that
// need nothing, and dependents of both (an index, foreign keys, a view).
const keepGoingSchema = `
CREATE EXTENSION pgcrypto;
CREATE COLLATION icu_und (provider = icu, locale = 'und');
CREATE SCHEMA app;
CREATE TABLE app.plain (id int PRIMARY KEY, v text NOT NULL);
CREATE TABLE app.sorted (id int PRIMARY KEY, name text COLLATE icu_und);
CREATE INDEX sorted_name ON app.sorted (name);
CREATE TABLE app.packed (id int PRIMARY KEY, body text COMPRESSION lz4);
CREATE TABLE app.hashed (id int PRIMARY KEY, h bytea DEFAULT gen_random_bytes(4));
CREATE TABLE app.placed (id int PRIMARY KEY, v text) TABLESPACE kg_space;
CREATE TABLE app.owned (id int PRIMARY KEY, v text);
ALTER TABLE app.owned OWNER TO kg_owner;
CREATE TABLE app.child (id int PRIMARY KEY, plain_id int REFERENCES app.plain, sorted_id int REFERENCES app.sorted);
CREATE INDEX child_plain ON app.child (plain_id);
CREATE VIEW app.sorted_names AS SELECT name FROM app.sorted;
CREATE VIEW app.plain_values AS SELECT v FROM app.plain;
INSERT INTO app.plain SELECT g, 'v' || g FROM generate_series(1, 500) g;
INSERT INTO app.sorted SELECT g, 'n' || g FROM generate_series(1, 300) g;
INSERT INTO app.packed SELECT g, repeat('x', 3000) FROM generate_series(1, 50) g;
INSERT INTO app.hashed SELECT g, '\x01'::bytea FROM generate_series(1, 40) g;
INSERT INTO app.placed SELECT g, 'p' FROM generate_series(1, 70) g;
INSERT INTO app.owned SELECT g, 'o' FROM generate_series(1, 20) g;
INSERT INTO app.child SELECT g, g, NULL FROM generate_series(1, 200) g;
`

// KeepGoingPair starts the source (PostgreSQL 15 with ICU, lz4 and
// pgcrypto, loaded with keepGoingSchema) and a target that lacks them (a
// build without ICU and lz4, without pgcrypto, and without the role and the
// tablespace), or skips when this machine has no such pair.
func KeepGoingPair(t testing.TB) (src, dst *Instance) {
	t.Helper()
	srcBin, err := BinDirFor(15)
	if err != nil {
		t.Skip("no PostgreSQL 15 here")
	}
	dstBin, err := BinDirFor(18)
	if err != nil {
		t.Skip("no PostgreSQL 18 here")
	}
	if out, err := exec.Command(filepath.Join(dstBin, "pg_config"), "--configure").Output(); err != nil || !strings.Contains(string(out), "--without-icu") || strings.Contains(string(out), "--with-lz4") {
		t.Skip("PostgreSQL 18 here is built with ICU or lz4: no target lacking them")
	}
	if out, err := exec.Command(filepath.Join(srcBin, "pg_config"), "--configure").Output(); err != nil || !strings.Contains(string(out), "--with-icu") || !strings.Contains(string(out), "--with-lz4") {
		t.Skip("PostgreSQL 15 here is built without ICU or lz4")
	}
	ctx := context.Background()
	src = New(t, Options{BinDir: srcBin})
	dst = New(t, Options{BinDir: dstBin})
	var have bool
	if conn, err := pgx.Connect(ctx, dst.ConnString("postgres")); err == nil {
		conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pgcrypto')").Scan(&have)
		conn.Close(ctx)
	}
	if have {
		t.Skip("PostgreSQL 18 here has pgcrypto")
	}
	for _, s := range []string{"CREATE ROLE kg_owner", "CREATE TABLESPACE kg_space LOCATION " + pg.Literal(TablespaceDir(t)), "CREATE DATABASE src"} {
		if err := src.Exec(ctx, "postgres", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.ExecPsql(ctx, "src", keepGoingSchema); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

// RequireEqualBut checks that the database dst equals src (schemas
// dumped with the pg_dump in binDir, across versions, entry by entry, and
// row hashes) except for the objects whose pg_dump entry names contain
// one of missing, which dst must lack: what a --keep-going restore leaves
// out is exactly those.
func RequireEqualBut(t testing.TB, binDir, src, dst string, missing ...string) {
	t.Helper()
	a := schemaEntries(compare.NormalizeAcrossVersions(SchemaDump(t, binDir, src)))
	b := schemaEntries(compare.NormalizeAcrossVersions(SchemaDump(t, binDir, dst)))
	left := func(name string) bool {
		return slices.ContainsFunc(missing, func(m string) bool { return strings.Contains(name, m) })
	}
	for name, body := range a {
		switch got, ok := b[name]; {
		case left(name) && ok:
			t.Errorf("the target has %q, which needs what it lacks", name)
		case !left(name) && !ok:
			t.Errorf("the target lacks %q", name)
		case !left(name) && got != body:
			t.Errorf("%q differs:\n- %s\n+ %s", name, body, got)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			t.Errorf("the target has %q, which the source does not", name)
		}
	}
	fa, fb := Fingerprint(t, src), Fingerprint(t, dst)
	for rel, h := range fa {
		switch got, ok := fb[rel]; {
		case left(rel) && ok:
			t.Errorf("the target has table %s, which needs what it lacks", rel)
		case !left(rel) && got != h:
			t.Errorf("%s: the target's rows differ from the source's", rel)
		}
	}
}

// schemaEntries splits a normalized pg_dump --schema-only text into its
// entries, by their "-- Name: ...; Type: ...; Schema: ...; Owner: ..."
// header, but pgsprint's journal, which an incomplete restore keeps for
// --resume.
func schemaEntries(dump string) map[string]string {
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(dump, "\n") {
		if h, ok := strings.CutPrefix(line, "-- Name: "); ok {
			name = h
			if strings.HasPrefix(h, "pgsprint_journal;") || strings.Contains(h, "; Schema: pgsprint_journal;") {
				name = ""
			}
			continue
		}
		if line == "-- PostgreSQL database dump complete" {
			break
		}
		if name != "" && !strings.HasPrefix(line, "SET ") && !strings.HasPrefix(line, "SELECT pg_catalog.set_config") {
			out[name] += line + "\n"
		}
	}
	return out
}

// Relations lists the target's tables, views, indexes and sequences
// outside the system schemas, as "kind schema.name".
func Relations(t testing.TB, conn string) []string {
	t.Helper()
	c, err := pgx.Connect(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(), `SELECT c.relkind::text || ' ' || n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast', 'pgsprint_journal') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// RequireRestoredRows checks that every table the target has holds
// exactly the source's rows (row hashes).
func RequireRestoredRows(t testing.TB, src, dst string) {
	t.Helper()
	a, err := compare.Fingerprint(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := compare.Fingerprint(context.Background(), dst)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rel, h := range b {
		if strings.HasPrefix(rel, "pgsprint_journal.") || strings.Contains(rel, "pgsprint_journal") {
			continue
		}
		n++
		if a[rel] != h {
			t.Errorf("%s: restored rows differ from the source's", rel)
		}
	}
	if n == 0 {
		t.Errorf("no table restored")
	}
}

// RequireValidIndexes checks that every index of the target is valid and
// ready, and every constraint validated.
func RequireValidIndexes(t testing.TB, conn string) {
	t.Helper()
	if n := Scalar(t, conn, "SELECT count(*) FROM pg_index WHERE NOT (indisvalid AND indisready)"); n != "0" {
		t.Errorf("%s indexes are not valid", n)
	}
	if n := Scalar(t, conn, "SELECT count(*) FROM pg_constraint WHERE NOT convalidated"); n != "0" {
		t.Errorf("%s constraints are not validated", n)
	}
}
