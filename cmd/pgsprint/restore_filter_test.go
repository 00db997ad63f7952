package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestRestoreSelectionPaths is what only the binary does with a selection
// (internal/restore's TestRestoreSelection restores the selections
// themselves): clone with -t, clone --data-only into a --schema-only
// restore, --to-sql of a selection loaded with psql, and the flags that
// cannot go together (usage errors, exit 2).
func TestRestoreSelectionPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.ExecPsql(ctx, "src", pgtest.SelectionSQL()); err != nil {
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

	t.Run("clone with a selection", func(t *testing.T) {
		db := fresh(t)
		mustPgsprint(t, "clone", "--source", src, "--target", c.ConnString(db), "-j", "2", "--chunk-size", "1MB",
			"-t", "app.customers", "-t", pgtest.WeirdTable, "-t", "big", "-q")
		sameRelations(t, c, src, db, "app.customers", pgtest.WeirdTable, "public.big")
		pgtest.OnlyRelations(t, c.ConnString(db), "app.customers", "app.customers_id_seq", pgtest.WeirdTable, "public.big")
		db2 := fresh(t)
		restore(t, db2, "--schema-only")
		mustPgsprint(t, "clone", "--source", src, "--target", c.ConnString(db2), "-j", "2", "--data-only", "-q")
		pgtest.RequireSameData(t, src, c.ConnString(db2))
	})
	t.Run("to-sql of a selection loads with psql", func(t *testing.T) {
		db := fresh(t)
		script := mustPgsprint(t, "restore", "-f", file, "--to-sql", "-t", "app.customers", "-t", pgtest.WeirdTable).stdout
		cmd := exec.Command(filepath.Join(c.BinDir(), "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", c.ConnString(db))
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		sameRelations(t, c, src, db, "app.customers", pgtest.WeirdTable)
		pgtest.OnlyRelations(t, c.ConnString(db), "app.customers", "app.customers_id_seq", pgtest.WeirdTable)
	})
	t.Run("bad selections", func(t *testing.T) {
		db := fresh(t)
		for _, tc := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"-t", "nope"}, 1, "no matching tables were found"},
			{[]string{"--data-only", "--clean"}, 2, "does not take --create or --clean"},
			{[]string{"--schema-only", "--data-only"}, 2, "cannot be used together"},
			{[]string{"--disable-triggers"}, 1, "--data-only restores only"},
		} {
			r := pgsprint(t, nil, append([]string{"restore", "-f", file, "-d", c.ConnString(db), "-q"}, tc.args...)...)
			checkOneError(t, r.code, tc.code, r.stderr, tc.msg)
		}
		pgtest.OnlyRelations(t, c.ConnString(db))
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
	pgtest.RequireData(t, src, c.ConnString(db), rels...)
}
