package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// TestRestoreUseList lists an archive with restore -l (no database), edits
// the list as a DBA edits pg_restore's, and restores it with -L: a table's
// TABLE DATA commented out leaves the table empty, a commented-out index is
// absent, everything else is as in the source; the schema equals what
// pg_restore -L with the same schema lines makes of the embedded schema. A
// list edited from pg_restore -l of the embedded schema (no data entries)
// loads the data of the tables it keeps.
func TestRestoreUseList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.ExecPsql(ctx, "src", pgtest.SelectionSQL()+`
CREATE SEQUENCE app.counter; SELECT setval('app.counter', 42);
CREATE MATERIALIZED VIEW app.totals AS SELECT customer_id, count(*) AS n FROM app.orders GROUP BY 1;
SELECT lo_from_bytea(0, 'large');`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "all.pgs")
	src := c.ConnString("src")
	mustPgsprint(t, "dump", "-d", src, "-f", file, "-j", "2", "--chunk-size", "1MB", "-q")
	list := mustPgsprint(t, "restore", "-l", "-f", file).stdout

	// pg_restore -l of the embedded schema: the schema lines of the list.
	schemaFile := extractSchema(t, file)
	out, err := exec.Command(filepath.Join(c.BinDir(), "pg_restore"), "-l", schemaFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	schemaList := string(out)
	for _, l := range entryLines(schemaList) {
		if !strings.Contains(list, "\n"+l+"\n") {
			t.Errorf("restore -l lacks pg_restore -l's line %q", l)
		}
	}
	for _, want := range []string{" TABLE DATA app orders ", " TABLE DATA public big ", " SEQUENCE SET app counter ",
		" MATERIALIZED VIEW DATA app totals ", " BLOBS - BLOBS"} {
		if !strings.Contains(list, want) {
			t.Errorf("restore -l lacks an entry with %q:\n%s", want, list)
		}
	}

	t.Run("TABLE DATA and an index commented out", func(t *testing.T) {
		edited := commentOut(list, func(l string) bool {
			return strings.Contains(l, " TABLE DATA app orders ") || strings.Contains(l, " INDEX app orders_note ")
		})
		listFile := filepath.Join(dir, "edited.list")
		if err := os.WriteFile(listFile, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.CreateDB(ctx, "dst1"); err != nil {
			t.Fatal(err)
		}
		mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("dst1"), "-L", listFile, "-j", "2", "-q", "--pre-data-split-min", "1")
		dst := c.ConnString("dst1")
		if n := pgtest.Scalar(t, dst, "SELECT count(*) FROM app.orders"); n != "0" {
			t.Errorf("app.orders has %s rows, want none (its TABLE DATA was commented out)", n)
		}
		if idx := pgtest.Scalar(t, dst, "SELECT to_regclass('app.orders_note') IS NULL"); idx != "true" {
			t.Errorf("index app.orders_note exists, but was commented out")
		}
		pgtest.RequireData(t, src, dst, "app.customers", "public.big", pgtest.WeirdTable)
		// Refreshed, from the empty app.orders.
		if v := pgtest.Scalar(t, dst, "SELECT relispopulated FROM pg_class WHERE oid = 'app.totals'::regclass"); v != "true" {
			t.Errorf("app.totals was not refreshed")
		}
		if v := pgtest.Scalar(t, dst, "SELECT last_value FROM app.counter"); v != "42" {
			t.Errorf("app.counter is %s, want 42", v)
		}
		if n := pgtest.Scalar(t, dst, "SELECT count(*) FROM pg_largeobject_metadata"); n != "1" {
			t.Errorf("%s large objects, want 1", n)
		}
		// pg_restore -L with the same schema lines, on the embedded schema.
		if err := c.CreateDB(ctx, "viapg1"); err != nil {
			t.Fatal(err)
		}
		pgRestoreList(t, c, "viapg1", schemaFile, keepSchemaLines(edited, schemaList))
		if got, want := pgtest.SchemaDump(t, c.BinDir(), dst), pgtest.SchemaDump(t, c.BinDir(), c.ConnString("viapg1")); got != want {
			t.Errorf("schema differs from pg_restore -L's:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("-l from a pipe, -L with --to-sql", func(t *testing.T) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if r := pgsprintStdin(t, nil, bytes.NewReader(data), "restore", "-l", "-f", "-"); r.code != 0 || r.stdout != list {
			t.Errorf("restore -l -f -: exit %d, %s\nlisting differs from the file's:\n%s", r.code, r.stderr, r.stdout)
		}
		edited := commentOut(list, func(l string) bool { return strings.Contains(l, " TABLE DATA app orders ") })
		listFile := filepath.Join(t.TempDir(), "sql.list")
		if err := os.WriteFile(listFile, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		script := mustPgsprint(t, "restore", "-f", file, "--to-sql", "-L", listFile).stdout
		if strings.Contains(script, `COPY "app"."orders"`) || !strings.Contains(script, `COPY "app"."customers"`) {
			t.Errorf("--to-sql -L: want COPY of app.customers and not of app.orders")
		}
	})
	t.Run("a list from pg_restore -l of the embedded schema", func(t *testing.T) {
		// The table big and everything of it left out: the other tables
		// come with their data.
		edited := commentOut(schemaList, func(l string) bool { return strings.Contains(l, " public big ") })
		listFile := filepath.Join(dir, "schema.list")
		if err := os.WriteFile(listFile, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.CreateDB(ctx, "dst2"); err != nil {
			t.Fatal(err)
		}
		mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("dst2"), "-L", listFile, "-j", "2", "-q")
		dst := c.ConnString("dst2")
		if v := pgtest.Scalar(t, dst, "SELECT to_regclass('public.big') IS NULL"); v != "true" {
			t.Errorf("public.big was restored, but its entries were commented out")
		}
		pgtest.RequireData(t, src, dst, "app.customers", "app.orders", pgtest.WeirdTable, "app.totals")
		if v := pgtest.Scalar(t, dst, "SELECT last_value FROM app.counter"); v != "42" {
			t.Errorf("app.counter is %s, want 42", v)
		}
		if err := c.CreateDB(ctx, "viapg2"); err != nil {
			t.Fatal(err)
		}
		pgRestoreList(t, c, "viapg2", schemaFile, edited)
		if got, want := pgtest.SchemaDump(t, c.BinDir(), dst), pgtest.SchemaDump(t, c.BinDir(), c.ConnString("viapg2")); got != want {
			t.Errorf("schema differs from pg_restore -L's:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("usage", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			code int
			msg  string
		}{
			{"-L with -t", []string{"-L", filepath.Join(dir, "edited.list"), "-t", "app.orders"}, exitUsage, "does not combine"},
			{"-l with -L", []string{"-l", "-L", filepath.Join(dir, "edited.list")}, exitUsage, "does not take -L"},
			{"missing list", []string{"-L", filepath.Join(dir, "nope.list")}, exitFailure, "nope.list"},
		} {
			r := pgsprint(t, nil, append([]string{"restore", "-f", file, "-d", c.ConnString("postgres"), "-q"}, tc.args...)...)
			checkOneError(t, r.code, tc.code, r.stderr, tc.msg)
		}
	})
	t.Run("an entry the archive lacks", func(t *testing.T) {
		listFile := filepath.Join(dir, "bad.list")
		if err := os.WriteFile(listFile, []byte(list+"999999; 0 0 TABLE DATA x y z\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := c.CreateDB(ctx, "dst3"); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString("dst3"), "-L", listFile, "-q")
		if r.code != 1 || !strings.Contains(r.stderr, "no entry 999999") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("exit %d, stderr %q: want 1 and one line naming the entry", r.code, r.stderr)
		}
		if objs := pgtest.UserObjects(t, c.ConnString("dst3")); len(objs) != 0 {
			t.Errorf("a refused restore created %v", objs)
		}
	})
}

// extractSchema writes the archive's embedded pg_dump archive to a file.
func extractSchema(t *testing.T, file string) string {
	t.Helper()
	f, err := openArchive(context.Background(), file, location.Options{}, archive.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tmp, err := archive.ExtractSchema(f.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Remove()
	path := filepath.Join(t.TempDir(), "schema.dump")
	if err := os.Rename(tmp.Path, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// entryLines are a listing's entry lines (not comments).
func entryLines(list string) []string {
	var out []string
	for _, l := range strings.Split(list, "\n") {
		if l != "" && !strings.HasPrefix(l, ";") {
			out = append(out, l)
		}
	}
	return out
}

// commentOut prefixes ";" to the entry lines drop says so of.
func commentOut(list string, drop func(string) bool) string {
	lines := strings.Split(list, "\n")
	for i, l := range lines {
		if l != "" && !strings.HasPrefix(l, ";") && drop(l) {
			lines[i] = ";" + l
		}
	}
	return strings.Join(lines, "\n")
}

// keepSchemaLines is the list of the lines of edited that are schema
// entries (in schemaList) and not commented out.
func keepSchemaLines(edited, schemaList string) string {
	var b strings.Builder
	for _, l := range entryLines(edited) {
		if strings.Contains(schemaList, "\n"+l+"\n") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// pgRestoreList restores the schema archive's entries a list keeps into
// database db with pg_restore -L.
func pgRestoreList(t *testing.T, c dbServer, db, schemaFile, list string) {
	t.Helper()
	listFile := filepath.Join(t.TempDir(), "pg.list")
	if err := os.WriteFile(listFile, []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(c.BinDir(), "pg_restore"), "--exit-on-error", "-L", listFile, "-d", c.ConnString(db), schemaFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_restore -L: %v\n%s", err, out)
	}
}
