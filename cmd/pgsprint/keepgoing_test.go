package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
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

// keepGoingPair starts the source (PostgreSQL 15 with ICU, lz4 and
// pgcrypto, loaded with keepGoingSchema) and a target that lacks them (a
// build without ICU and lz4, without pgcrypto, and without the role and the
// tablespace), or skips when this machine has no such pair.
func keepGoingPair(t *testing.T) (src, dst *pgtest.Instance) {
	t.Helper()
	srcBin, err := pgtest.BinDirFor(15)
	if err != nil {
		t.Skip("no PostgreSQL 15 here")
	}
	dstBin, err := pgtest.BinDirFor(18)
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
	src = pgtest.New(t, pgtest.Options{BinDir: srcBin})
	dst = pgtest.New(t, pgtest.Options{BinDir: dstBin})
	var have bool
	if conn, err := pgx.Connect(ctx, dst.ConnString("postgres")); err == nil {
		conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pgcrypto')").Scan(&have)
		conn.Close(ctx)
	}
	if have {
		t.Skip("PostgreSQL 18 here has pgcrypto")
	}
	for _, s := range []string{"CREATE ROLE kg_owner", "CREATE TABLESPACE kg_space LOCATION " + pg.Literal(pgtest.TablespaceDir(t)), "CREATE DATABASE src"} {
		if err := src.Exec(ctx, "postgres", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.ExecPsql(ctx, "src", keepGoingSchema); err != nil {
		t.Fatal(err)
	}
	return src, dst
}

// TestKeepGoing restores, with --keep-going, an archive dumped from
// PostgreSQL 15 into a PostgreSQL 18 that lacks ICU, lz4, pgcrypto, the
// tablespace and the role: every object pg_restore restores from the same
// schema is restored, every failure is named with the server's error and
// its dependents under it, every restored table holds exactly the source's
// rows, and the run exits 1. Then the target gets what it lacked that can
// be given (the role and the tablespace) and --resume finishes what those
// held back; what it still lacks stays named.
func TestKeepGoing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := keepGoingPair(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "kg.pgs")
	mustPgsprint(t, "dump", "-d", src.ConnString("src"), "-f", file, "-j", "2", "-q")
	custom := filepath.Join(dir, "kg.dump")
	if out, err := exec.Command(filepath.Join(src.BinDir(), "pg_dump"), "-Fc", "-f", custom, "-d", src.ConnString("src")).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	for _, db := range []string{"by_pg_restore", "kg", "stops"} {
		if err := dst.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	prOut, _ := exec.Command(filepath.Join(dst.BinDir(), "pg_restore"), "-d", dst.ConnString("by_pg_restore"), custom).CombinedOutput()
	t.Logf("pg_restore:\n%s", prOut)

	// Preflight names, before anything runs, each thing the target
	// lacks and the objects that need it: not ready without --keep-going,
	// ready with it, saying what it would leave out.
	requirePreflightLacks(t, file, dst.ConnString("stops"))

	// The default stops at the first error.
	r := pgsprint(t, nil, "restore", "-f", file, "-d", dst.ConnString("stops"), "-j", "2", "-q")
	if r.code != 1 {
		t.Fatalf("restore without --keep-going: exit %d, want 1\n%s", r.code, r.stderr)
	}

	summary := filepath.Join(dir, "summary.json")
	r = pgsprint(t, nil, "restore", "-f", file, "-d", dst.ConnString("kg"), "-j", "2", "--keep-going", "--summary-json", summary)
	t.Logf("restore --keep-going:\n%s", r.stderr)
	if r.code != 1 {
		t.Fatalf("restore --keep-going: exit %d, want 1", r.code)
	}
	for _, want := range []string{
		`EXTENSION pgcrypto`, `COLLATION public.icu_und`, `TABLE app.packed`, `lz4`,
		`skipped because of it: `, `TABLE app.sorted`, `TABLE app.hashed`, `kg_space`, `kg_owner`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the end of the run does not name %q", want)
		}
	}
	if len(summaryFailures(t, summary)) == 0 {
		t.Errorf("--summary-json has no failures")
	}

	// At least every relation pg_restore restored, and every restored
	// table exact.
	have := relations(t, dst.ConnString("kg"))
	for _, rel := range relations(t, dst.ConnString("by_pg_restore")) {
		if !slices.Contains(have, rel) {
			t.Errorf("pg_restore restored %s, pgsprint --keep-going did not", rel)
		}
	}
	requireRestoredRows(t, src.ConnString("src"), dst.ConnString("kg"))
	requireValidIndexes(t, dst.ConnString("kg"))

	// From a pipe and in a clone likewise.
	for _, db := range []string{"piped", "cloned"} {
		if err := dst.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r = pgsprintStdin(t, nil, f, "restore", "-f", "-", "-d", dst.ConnString("piped"), "-j", "2", "--keep-going", "-q")
	if r.code != 1 || !strings.Contains(r.stderr, "restore incomplete: 3 objects failed") {
		t.Errorf("restore -f - --keep-going: exit %d, want 1 and 3 failures\n%s", r.code, r.stderr)
	}
	requirePreflightCloneLacks(t, src.ConnString("src"), dst.ConnString("cloned"))
	r = pgsprint(t, nil, "clone", "--source", src.ConnString("src"), "--target", dst.ConnString("cloned"), "-j", "2", "--keep-going")
	if r.code != 1 || !strings.Contains(r.stderr, "failed: COLLATION public.icu_und") {
		t.Errorf("clone --keep-going: exit %d, want 1 and the collation named\n%s", r.code, r.stderr)
	}
	for _, db := range []string{"piped", "cloned"} {
		if got, want := relations(t, dst.ConnString(db)), have; !slices.Equal(got, want) {
			t.Errorf("%s holds %v, the restore %v", db, got, want)
		}
		requireRestoredRows(t, src.ConnString("src"), dst.ConnString(db))
	}

	// What can be installed is installed: the role and the tablespace;
	// --resume finishes what they held back.
	for _, s := range []string{"CREATE ROLE kg_owner", "CREATE TABLESPACE kg_space LOCATION " + pg.Literal(pgtest.TablespaceDir(t))} {
		if err := dst.Exec(ctx, "postgres", s); err != nil {
			t.Fatal(err)
		}
	}
	r = pgsprint(t, nil, "restore", "-f", file, "-d", dst.ConnString("kg"), "-j", "2", "--keep-going", "--resume", "--summary-json", summary)
	t.Logf("restore --keep-going --resume:\n%s", r.stderr)
	if r.code != 1 {
		t.Fatalf("restore --keep-going --resume into a target still without ICU: exit %d, want 1", r.code)
	}
	if got := scalar(t, dst.ConnString("kg"), "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'app.owned'::regclass"); got != "kg_owner" {
		t.Errorf("after --resume app.owned belongs to %s, want kg_owner", got)
	}
	if got := scalar(t, dst.ConnString("kg"), "SELECT coalesce((SELECT spcname FROM pg_tablespace WHERE oid = reltablespace), '') FROM pg_class WHERE oid = 'app.placed'::regclass"); got != "kg_space" {
		t.Errorf("after --resume app.placed is in tablespace %q, want kg_space", got)
	}
	if !strings.Contains(r.stderr, "0 created without their owner or tablespace") {
		t.Errorf("--resume did not finish the objects created without their owner or tablespace")
	}
	requireRestoredRows(t, src.ConnString("src"), dst.ConnString("kg"))
	requireValidIndexes(t, dst.ConnString("kg"))

	// Everything but what needs pgcrypto, ICU or lz4 (and what depends on
	// it) now equals the source, and exactly those are still named.
	failures := summaryFailures(t, summary)
	var failed []string
	for obj := range failures {
		failed = append(failed, obj)
	}
	slices.Sort(failed)
	if want := []string{"COLLATION public.icu_und", "EXTENSION pgcrypto", "TABLE app.packed"}; !slices.Equal(failed, want) {
		t.Errorf("--resume still names the failures %v, want %v", failed, want)
	}
	for obj, want := range map[string][]string{
		"EXTENSION pgcrypto":       {"TABLE app.hashed"},
		"COLLATION public.icu_und": {"TABLE app.sorted", "INDEX app.sorted_name", "VIEW app.sorted_names", "FK CONSTRAINT app.child child_sorted_id_fkey"},
	} {
		for _, w := range want {
			if !slices.Contains(failures[obj], w) {
				t.Errorf("--resume does not name %s as skipped because of %s (it names %v)", w, obj, failures[obj])
			}
		}
	}
	requireEqualBut(t, dst.BinDir(), src.ConnString("src"), dst.ConnString("kg"), "pgcrypto", "icu_und", "sorted", "packed", "hashed")

	// Into a server that has everything, --keep-going has nothing to
	// leave out: the restore equals the source.
	if err := src.Exec(ctx, "postgres", "CREATE DATABASE full_copy"); err != nil {
		t.Fatal(err)
	}
	r = pgsprint(t, nil, "restore", "-f", file, "-d", src.ConnString("full_copy"), "-j", "2", "--keep-going", "--summary-json", summary)
	if r.code != 0 || strings.Contains(r.stderr, "failed") || len(summaryFailures(t, summary)) != 0 {
		t.Errorf("restore --keep-going into a full server: exit %d, want 0 and no failure\n%s", r.code, r.stderr)
	}
	pgtest.RequireSameSchema(t, src.BinDir(), src.ConnString("src"), src.ConnString("full_copy"))
	if d := compare.FingerprintDiff(pgtest.Fingerprint(t, src.ConnString("src")), pgtest.Fingerprint(t, src.ConnString("full_copy"))); len(d) > 0 {
		t.Errorf("restore --keep-going into a full server: rows differ:\n%s", strings.Join(d, "\n"))
	}
	requireValidIndexes(t, src.ConnString("full_copy"))
}

// summaryFailures reads --summary-json's failures: the objects that
// failed, each with the objects skipped because of it.
func summaryFailures(t *testing.T, file string) map[string][]string {
	t.Helper()
	var s struct {
		Failures []struct {
			Object  string   `json:"object"`
			Error   string   `json:"error"`
			Skipped []string `json:"skipped"`
		} `json:"failures"`
	}
	if b, err := os.ReadFile(file); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range s.Failures {
		if f.Error == "" {
			t.Errorf("--summary-json names %s without its error", f.Object)
		}
		out[f.Object] = f.Skipped
	}
	return out
}

// requireEqualBut checks that the database dst equals src (schemas
// dumped with the pg_dump in binDir, across versions, entry by entry, and
// row hashes) except for the objects whose pg_dump entry names contain
// one of missing, which dst must lack: what a --keep-going restore leaves
// out is exactly those.
func requireEqualBut(t *testing.T, binDir, src, dst string, missing ...string) {
	t.Helper()
	a := schemaEntries(compare.NormalizeAcrossVersions(pgtest.SchemaDump(t, binDir, src)))
	b := schemaEntries(compare.NormalizeAcrossVersions(pgtest.SchemaDump(t, binDir, dst)))
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
	fa, fb := pgtest.Fingerprint(t, src), pgtest.Fingerprint(t, dst)
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

// requirePreflightLacks checks preflight restore of keepGoingSchema's
// archive (file) into target, which lacks what keepGoingPair's lacks:
// every missing thing is named with the objects that need it; without
// --keep-going it fails, as the restore would; with it, it is ready and
// names what would be left out or created without its owner or
// tablespace.
func requirePreflightLacks(t *testing.T, file, target string) {
	t.Helper()
	r := pgsprint(t, nil, "preflight", "restore", "-f", file, "-d", target)
	t.Logf("preflight restore:\n%s", r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, "not ready") {
		t.Errorf("preflight restore into a target that lacks things: exit %d, want 1 and not ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto", needed by EXTENSION pgcrypto`,
		`✗ target collations: the target lacks collation provider "icu", needed by COLLATION public.icu_und`,
		`✗ target compression: the target lacks compression method "lz4", needed by TABLE app.packed, TABLE DATA app.packed`,
		`✗ target roles: the target lacks role "kg_owner", owner of TABLE app.owned`,
		`✗ target tablespaces: the target lacks tablespace "kg_space", where TABLE app.placed go`,
		"the run would stop at the first",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight restore does not say %q", want)
		}
	}
	r = pgsprint(t, nil, "preflight", "restore", "-f", file, "-d", target, "--keep-going")
	t.Logf("preflight restore --keep-going:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "ready: the run would start") {
		t.Errorf("preflight restore --keep-going: exit %d, want 0 and ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`! target extensions: the target lacks extension "pgcrypto"`, "--keep-going leaves them out, and skips the", "TABLE app.hashed",
		"! target collations:", "TABLE app.sorted", "INDEX app.sorted_name", "VIEW app.sorted_names",
		"! target compression:", "! target roles:", "--keep-going creates them owned by",
		"! target tablespaces:", "--keep-going creates them in the default tablespace",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight restore --keep-going does not say %q", want)
		}
	}
}

// requirePreflightCloneLacks checks preflight clone of keepGoingSchema's
// source into target as requirePreflightLacks does preflight restore: the
// source's schema, read as the clone reads it, says what target lacks.
func requirePreflightCloneLacks(t *testing.T, source, target string) {
	t.Helper()
	r := pgsprint(t, nil, "preflight", "clone", "--source", source, "--target", target)
	t.Logf("preflight clone:\n%s", r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, "not ready") {
		t.Errorf("preflight clone into a target that lacks things: exit %d, want 1 and not ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto"`, `✗ target collations: the target lacks collation provider "icu"`,
		`✗ target compression: the target lacks compression method "lz4"`, `✗ target roles: the target lacks role "kg_owner"`,
		`✗ target tablespaces: the target lacks tablespace "kg_space"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight clone does not say %q", want)
		}
	}
	r = pgsprint(t, nil, "preflight", "clone", "--source", source, "--target", target, "--keep-going")
	t.Logf("preflight clone --keep-going:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "ready: the run would start") {
		t.Errorf("preflight clone --keep-going: exit %d, want 0 and ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"! target extensions:", "! target collations:", "! target compression:", "! target roles:", "! target tablespaces:", "TABLE app.sorted"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight clone --keep-going does not say %q", want)
		}
	}
}

// TestKeepGoingNotWithAll: --keep-going with --all is refused as a usage
// error until the whole-server run carries it, rather than ignored.
func TestKeepGoingNotWithAll(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"restore", "--all", "--keep-going", "-f", "nowhere.pgs", "-d", "host=/nonexistent"},
		{"restore", "--database", "x", "--keep-going", "-f", "nowhere.pgs", "-d", "host=/nonexistent"},
		{"clone", "--all", "--keep-going", "--source", "host=/nonexistent", "--target", "host=/nonexistent2"},
	} {
		r := pgsprint(t, nil, args...)
		checkOneError(t, r.code, 2, r.stderr, "--keep-going is not supported with")
	}
}

// relations lists the target's tables, views, indexes and sequences
// outside the system schemas, as "kind schema.name".
func relations(t *testing.T, conn string) []string {
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

// requireRestoredRows checks that every table the target has holds
// exactly the source's rows (row hashes).
func requireRestoredRows(t *testing.T, src, dst string) {
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

// requireValidIndexes checks that every index of the target is valid and
// ready, and every constraint validated.
func requireValidIndexes(t *testing.T, conn string) {
	t.Helper()
	if n := scalar(t, conn, "SELECT count(*) FROM pg_index WHERE NOT (indisvalid AND indisready)"); n != "0" {
		t.Errorf("%s indexes are not valid", n)
	}
	if n := scalar(t, conn, "SELECT count(*) FROM pg_constraint WHERE NOT convalidated"); n != "0" {
		t.Errorf("%s constraints are not validated", n)
	}
}
