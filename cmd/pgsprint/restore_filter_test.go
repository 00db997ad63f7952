package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// selectionDDL is a source for partial restores: two schemas with a
// foreign key between them, serial and identity columns, a trigger and its
// function, a view, a comment, hostile names, and a table big enough to be
// dumped in several chunks.
const selectionDDL = `
CREATE SCHEMA app;
CREATE TABLE app.customers (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
CREATE TABLE app.orders (id serial PRIMARY KEY, customer_id int NOT NULL REFERENCES app.customers, note text,
	touched timestamptz);
CREATE INDEX orders_note ON app.orders (note);
COMMENT ON TABLE app.orders IS 'orders, one per line';
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.touched := now(); RETURN NEW; END$$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON app.orders FOR EACH ROW EXECUTE FUNCTION app.touch();
CREATE VIEW app.order_view AS SELECT o.id, c.name FROM app.orders o JOIN app.customers c ON c.id = o.customer_id;
CREATE SCHEMA "we""ird
sch";
CREATE TABLE "we""ird
sch"."t; drop" (id int PRIMARY KEY, customer_id int REFERENCES app.customers, "v""al" text);
CREATE TABLE "we""ird
sch"."Other" (x int);
CREATE TABLE public.big (id bigint PRIMARY KEY, pad text);
INSERT INTO app.customers (name) SELECT 'customer ' || g FROM generate_series(1, 200) g;
INSERT INTO app.orders (customer_id, note) SELECT 1 + g % 200, 'note ' || g FROM generate_series(1, 3000) g;
INSERT INTO "we""ird
sch"."t; drop" SELECT g, 1 + g % 200, E'a\tb\\c' || g FROM generate_series(1, 500) g;
INSERT INTO "we""ird
sch"."Other" SELECT g FROM generate_series(1, 10) g;
INSERT INTO public.big SELECT g, repeat('x', 200) FROM generate_series(1, 40000) g;
ANALYZE;
`

const weirdTable = "\"we\"\"ird\nsch\".\"t; drop\""

// TestRestoreSelection restores parts of one archive: each case checks the
// restored relations' schema (pg_dump -t on both sides) and rows (content
// hashes) against the source, and that nothing else was created.
func TestRestoreSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.ExecPsql(ctx, "src", selectionDDL); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "all.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("src"), "-f", file, "-j", "2", "--chunk-size", "1MB", "-q")
	src := c.ConnString("src")
	n := 0
	fresh := func(t *testing.T) string {
		t.Helper()
		n++
		db := "dst" + string(rune('a'+n))
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		return db
	}
	restore := func(t *testing.T, db string, args ...string) result {
		t.Helper()
		return mustPgsprint(t, append([]string{"restore", "-f", file, "-d", c.ConnString(db), "-j", "2", "-q"}, args...)...)
	}

	t.Run("one table brings its parts and its schema", func(t *testing.T) {
		db := fresh(t)
		r := restore(t, db, "-t", "app.customers")
		sameRelations(t, c, src, db, "app.customers")
		onlyRelations(t, c.ConnString(db), "app.customers", "app.customers_id_seq")
		if r.stderr != "" {
			t.Errorf("unexpected output: %s", r.stderr)
		}
	})
	t.Run("foreign key to a table not restored is left out and said so", func(t *testing.T) {
		db := fresh(t)
		// Not -q: the left-out key is a warning, and -q prints errors only.
		r := mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString(db), "-j", "2", "--progress", "none", "-t", weirdTable)
		onlyRelations(t, c.ConnString(db), weirdTable)
		requireData(t, src, c.ConnString(db), weirdTable)
		if !strings.Contains(r.stderr, "not restored") || !strings.Contains(r.stderr, "FK CONSTRAINT") {
			t.Errorf("no warning about the left-out foreign key: %q", r.stderr)
		}
		// With the referenced table present, the same restore keeps it.
		db2 := fresh(t)
		restore(t, db2, "-t", "app.customers")
		restore(t, db2, "-t", weirdTable)
		sameRelations(t, c, src, db2, "app.customers", weirdTable)
	})
	t.Run("schema with its functions, triggers and views, minus a table", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, "-n", "app")
		want := pgtest.SchemaDump(t, c.BinDir(), src, "-n", "app")
		if got := pgtest.SchemaDump(t, c.BinDir(), c.ConnString(db), "-n", "app"); got != want {
			t.Errorf("schema app differs:\n%s\nwant:\n%s", got, want)
		}
		requireData(t, src, c.ConnString(db), "app.customers", "app.orders")
		db2 := fresh(t)
		restore(t, db2, "-N", "app", "-T", "big")
		onlyRelations(t, c.ConnString(db2), weirdTable, `"we""ird`+"\n"+`sch"."Other"`)
	})
	t.Run("exclusions keep everything else", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, "-N", `"we""ird`+"\n"+`sch"`, "--exclude-table-data", "big")
		want := pgtest.SchemaDump(t, c.BinDir(), src, "-N", `"we""ird`+"\n"+`sch"`)
		if got := pgtest.SchemaDump(t, c.BinDir(), c.ConnString(db)); got != want {
			t.Errorf("schema differs from pg_dump -N's:\n%s\nwant:\n%s", got, want)
		}
		requireData(t, src, c.ConnString(db), "app.customers", "app.orders")
		if rows := scalar(t, c.ConnString(db), "SELECT count(*) FROM public.big"); rows != "0" {
			t.Errorf("--exclude-table-data: big has %s rows", rows)
		}
	})
	t.Run("clone with a selection", func(t *testing.T) {
		db := fresh(t)
		mustPgsprint(t, "clone", "--source", src, "--target", c.ConnString(db), "-j", "2", "--chunk-size", "1MB",
			"-t", "app.customers", "-t", weirdTable, "-t", "big", "-q")
		sameRelations(t, c, src, db, "app.customers", weirdTable, "public.big")
		onlyRelations(t, c.ConnString(db), "app.customers", "app.customers_id_seq", weirdTable, "public.big")
		db2 := fresh(t)
		restore(t, db2, "--schema-only")
		mustPgsprint(t, "clone", "--source", src, "--target", c.ConnString(db2), "-j", "2", "--data-only", "-q")
		pgtest.RequireSameData(t, src, c.ConnString(db2))
	})
	t.Run("to-sql of a selection loads with psql", func(t *testing.T) {
		db := fresh(t)
		script := mustPgsprint(t, "restore", "-f", file, "--to-sql", "-t", "app.customers", "-t", weirdTable).stdout
		cmd := exec.Command(filepath.Join(c.BinDir(), "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", c.ConnString(db))
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		sameRelations(t, c, src, db, "app.customers", weirdTable)
		onlyRelations(t, c.ConnString(db), "app.customers", "app.customers_id_seq", weirdTable)
	})
	t.Run("chunked table from a pipe, other streams skipped", func(t *testing.T) {
		db := fresh(t)
		cmd := exec.Command(binary, "restore", "-f", "-", "-d", c.ConnString(db), "-j", "1", "-t", "public.big", "-q")
		in, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		cmd.Stdin = in
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("restore -f - -t public.big: %v\n%s", err, out)
		}
		sameRelations(t, c, src, db, "public.big")
		onlyRelations(t, c.ConnString(db), "public.big")
	})
	t.Run("one table back with --clean, the rest untouched", func(t *testing.T) {
		db := fresh(t)
		restore(t, db)
		if err := c.Exec(ctx, db, `DELETE FROM `+weirdTable+` WHERE id % 3 = 0; UPDATE app.customers SET name = 'kept' WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
		restore(t, db, "-t", weirdTable, "--clean")
		// Its foreign key to a table already there is back too.
		if err := c.Exec(ctx, db, `UPDATE app.customers SET name = 'customer 1' WHERE id = 1`); err != nil {
			t.Fatal(err)
		}
		pgtest.RequireSameSchema(t, c.BinDir(), src, c.ConnString(db))
		pgtest.RequireSameData(t, src, c.ConnString(db))
		// A table a view depends on cannot be dropped: refused, saying why.
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString(db), "-t", "app.orders", "--clean", "-q")
		checkOneError(t, r.code, 1, r.stderr, "view app.order_view depends on table app.orders")
		// Without --clean, an existing relation is refused before anything runs.
		r = pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString(db), "-t", "app.orders", "-q")
		checkOneError(t, r.code, 1, r.stderr, `already has "app"."orders"`)
		pgtest.RequireSameData(t, src, c.ConnString(db))
	})
	t.Run("schema-only then data-only equals a full restore", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, "--schema-only")
		if rows := scalar(t, c.ConnString(db), "SELECT count(*) FROM app.orders"); rows != "0" {
			t.Fatalf("--schema-only loaded %s rows", rows)
		}
		restore(t, db, "--data-only")
		pgtest.RequireSameSchema(t, c.BinDir(), src, c.ConnString(db))
		pgtest.RequireSameData(t, src, c.ConnString(db))
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString(db), "--data-only", "-q")
		checkOneError(t, r.code, 1, r.stderr, "already has rows")
	})
	t.Run("data-only archive", func(t *testing.T) {
		data := filepath.Join(dir, "data.pgs")
		mustPgsprint(t, "dump", "-d", src, "-f", data, "--data-only", "-t", "app.*", "-q")
		db := fresh(t)
		restore(t, db, "--schema-only")
		mustPgsprint(t, "restore", "-f", data, "-d", c.ConnString(db), "-q")
		requireData(t, src, c.ConnString(db), "app.customers", "app.orders", "app.orders_id_seq", "app.customers_id_seq")
		if rows := scalar(t, c.ConnString(db), "SELECT count(*) FROM public.big"); rows != "0" {
			t.Errorf("table outside the data-only dump has %s rows", rows)
		}
	})
	t.Run("bad selections", func(t *testing.T) {
		db := fresh(t)
		for _, tc := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"-t", "nope"}, 1, "no matching tables were found"},
			{[]string{"-n", "nope"}, 1, "no matching schemas were found"},
			{[]string{"-t", "other.app.orders"}, 1, "cross-database references are not implemented"},
			{[]string{"--data-only", "--clean"}, 2, "does not take --create or --clean"},
			{[]string{"--schema-only", "--data-only"}, 2, "cannot be used together"},
			// The archive decides (one dumped with --data-only or
			// --no-schema restores as data only): a failure, not usage.
			{[]string{"--disable-triggers"}, 1, "--data-only restores only"},
		} {
			r := pgsprint(t, nil, append([]string{"restore", "-f", file, "-d", c.ConnString(db), "-q"}, tc.args...)...)
			checkOneError(t, r.code, tc.code, r.stderr, tc.msg)
		}
		onlyRelations(t, c.ConnString(db))
	})
}

// sameRelations compares, between the source and database db, what
// pg_dump says of each relation (with its indexes, constraints, triggers)
// and the relation's rows.
func sameRelations(t *testing.T, c dbServer, src, db string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		want := pgtest.SchemaDump(t, c.BinDir(), src, "-t", rel)
		if got := pgtest.SchemaDump(t, c.BinDir(), c.ConnString(db), "-t", rel); got != want {
			t.Errorf("%s: schema differs:\n%s\nwant:\n%s", rel, got, want)
		}
	}
	requireData(t, src, c.ConnString(db), rels...)
}

// onlyRelations fails unless db's user tables, views and sequences are
// exactly rels (plus pgsprint's own nothing: the journal must be gone).
func onlyRelations(t *testing.T, conn string, rels ...string) {
	t.Helper()
	fp := pgtest.Fingerprint(t, conn)
	want := map[string]bool{}
	for _, r := range rels {
		want[fingerprintKey(r)] = true
	}
	for k := range fp {
		if !want[k] && !strings.HasPrefix(k, "large object") {
			t.Errorf("unexpected relation restored: %s", k)
		}
	}
	for k := range want {
		if _, ok := fp[k]; !ok {
			t.Errorf("relation missing: %s", k)
		}
	}
}

// fingerprintKey turns app.orders or a quoted name into the fingerprint's
// format('%I.%I') key.
func fingerprintKey(rel string) string {
	if strings.HasPrefix(rel, `"`) {
		return rel
	}
	schema, name, _ := strings.Cut(rel, ".")
	return fmtID(schema) + "." + fmtID(name)
}

// TestRestoreSelectionTorture restores the torture schema without some
// tables (one of them a partition, whose indexes are attached to the
// parent's) and checks the result against pg_dump's own selection with the
// same -T patterns: schema text equal, every other table's rows and every
// large object equal.
func TestRestoreSelectionTorture(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	c.TortureDB("src")
	file := filepath.Join(t.TempDir(), "torture.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("src"), "-f", file, "-q")
	if err := c.CreateDB(ctx, "dst"); err != nil {
		t.Fatal(err)
	}
	excluded := []string{"app.audit_log", `"dot.ted".*`, "app.measurements_default"}
	var args []string
	for _, p := range excluded {
		args = append(args, "-T", p)
	}
	// Pre-data split over both connections (--pre-data-split-min 1):
	// the selection is what each run restores.
	mustPgsprint(t, append([]string{"restore", "-f", file, "-d", c.ConnString("dst"), "-j", "2", "-q", "--pre-data-split-min", "1"}, args...)...)
	want := pgtest.SchemaDump(t, c.BinDir(), c.ConnString("src"), args...)
	if got := pgtest.SchemaDump(t, c.BinDir(), c.ConnString("dst")); got != want {
		t.Errorf("schema differs from pg_dump %v:\n%s", args, compare.SchemaDiff(want, got))
	}
	fa, fb := pgtest.Fingerprint(t, c.ConnString("src")), pgtest.Fingerprint(t, c.ConnString("dst"))
	gone := map[string]bool{"app.audit_log": true, `"dot.ted"."tab.le"`: true, "app.measurements_default": true, "app.audit_log_id_seq": true}
	los := 0
	for k, v := range fa {
		if strings.HasPrefix(k, "large object") {
			los++
		}
		switch {
		case gone[k]:
			if _, ok := fb[k]; ok {
				t.Errorf("%s was restored", k)
			}
		case fb[k] != v:
			t.Errorf("%s: source %q, restored %q", k, v, fb[k])
		}
	}
	if los == 0 {
		t.Error("the torture schema has no large objects: the case proves less than it says")
	}
}
