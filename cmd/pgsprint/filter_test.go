package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDumpFilters: -n/-N/-t/-T select exactly the tables pg_dump selects
// with the same patterns, hostile names included, and
// --exclude-table-data keeps a table's definition but not its rows.
func TestDumpFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	tables := []string{`app.orders`, `app.order_items`, `app.log_2024`, `"App"."Orders"`, `public."Mixed Case"`,
		`public."a.b"`, `public."x$y"`, `public.t1`, `public.t2`, `"we.ird"."t?"`, `"we.ird".tx`}
	ddl := `CREATE SCHEMA app; CREATE SCHEMA "App"; CREATE SCHEMA "we.ird";`
	for _, tb := range tables {
		ddl += "CREATE TABLE " + tb + " (id int); INSERT INTO " + tb + " VALUES (1);"
	}
	if err := c.Exec(ctx, "f", ddl); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, args := range [][]string{
		{"-t", "app.order*"},
		{"-t", `"App"."Orders"`},
		{"-t", "App.Orders"},
		{"-t", "*.t?"},
		{"-t", `"a.b"`},
		{"-t", "x$y"},
		{"-t", `"Mixed Case"`},
		{"-t", `"we.ird".*`},
		{"-t", "t?"},
		{"-n", "app", "-T", "app.log*"},
		{"-N", "app", "-N", `"we.ird"`},
		{"-n", "*p*"},
		{"-n", "app", "--exclude-table-data", "app.orders"},
		{"-t", c.Name("f") + ".app.order*"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			file := filepath.Join(dir, string(rune('a'+i))+".pgs")
			mustPgsprint(t, append([]string{"dump", "-d", c.ConnString("f"), "-f", file, "-q"}, args...)...)
			var l struct {
				Tables []struct{ Schema, Name string }
			}
			if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", file).stdout), &l); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tb := range l.Tables {
				got = append(got, pgtest.DumpIdent(tb.Schema)+"."+pgtest.DumpIdent(tb.Name))
			}
			plain, err := exec.Command(filepath.Join(c.BinDir(), "pg_dump"), append([]string{"--schema-only", "-d", c.ConnString("f")}, args...)...).Output()
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, tb := range tables {
				inData := !(len(args) > 2 && args[2] == "--exclude-table-data" && tb == "app.orders")
				if strings.Contains(string(plain), "CREATE TABLE "+tb+" (") && inData {
					want = append(want, tb)
				}
			}
			sort.Strings(got)
			sort.Strings(want)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("pgsprint dumped data of %v, pg_dump selects %v", got, want)
			}
			if len(want) == 0 {
				t.Errorf("pattern selects nothing: the case proves little")
			}
			schema := mustPgsprint(t, "restore", "-f", file, "--to-sql").stdout
			for _, tb := range tables {
				if strings.Contains(schema, "CREATE TABLE "+tb+" (") != strings.Contains(string(plain), "CREATE TABLE "+tb+" (") {
					t.Errorf("archived schema and pg_dump disagree on %s", tb)
				}
			}
		})
	}
}
