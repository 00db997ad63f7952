package restore

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// selecting returns an edit of restore's options (and of dump's, via
// sel) that sets the selection and -j 2.
func selecting(sel filter.Selection, more ...func(*Options)) func(*Options) {
	return func(o *Options) {
		o.Jobs, o.Filter.Selection = 2, sel
		for _, m := range more {
			m(o)
		}
	}
}

// syncBuffer is a bytes.Buffer a logger may write from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRestoreSelection restores parts of one archive: each case checks the
// restored relations' schema (pg_dump -t on both sides) and rows (content
// hashes) against the source, and that nothing else was created. (What
// only the binary does with a selection, clone's and --to-sql's and the
// usage errors, is cmd/pgsprint's TestRestoreSelectionPaths.)
func TestRestoreSelection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Shared(t)
	srcDB := pgtest.DB(t, c, "src")
	if err := c.ExecPsql(ctx, srcDB, pgtest.SelectionSQL()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "all.pgs")
	src := c.ConnString(srcDB)
	dumpFile(t, src, file, func(o *dump.Options) { o.Jobs, o.Split.ChunkSize = 2, 1<<20 })
	fresh := func(t *testing.T) string {
		t.Helper()
		return c.ConnString(pgtest.DB(t, c, "dst"))
	}
	restore := func(t *testing.T, db string, sel filter.Selection, more ...func(*Options)) {
		t.Helper()
		mustRestore(t, file, db, selecting(sel, more...))
	}
	clean := func(o *Options) { o.Clean = true }

	t.Run("one table brings its parts and its schema", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, filter.Selection{Tables: []string{"app.customers"}})
		sameRelations(t, c.BinDir(), src, db, "app.customers")
		pgtest.OnlyRelations(t, db, "app.customers", "app.customers_id_seq")
	})
	t.Run("foreign key to a table not restored is left out and said so", func(t *testing.T) {
		db := fresh(t)
		var log syncBuffer
		restore(t, db, filter.Selection{Tables: []string{pgtest.WeirdTable}}, func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		})
		pgtest.OnlyRelations(t, db, pgtest.WeirdTable)
		pgtest.RequireData(t, src, db, pgtest.WeirdTable)
		if !strings.Contains(log.String(), "not restored") || !strings.Contains(log.String(), "FK CONSTRAINT") {
			t.Errorf("no warning about the left-out foreign key: %q", log.String())
		}
		// With the referenced table present, the same restore keeps it.
		db2 := fresh(t)
		restore(t, db2, filter.Selection{Tables: []string{"app.customers"}})
		restore(t, db2, filter.Selection{Tables: []string{pgtest.WeirdTable}})
		sameRelations(t, c.BinDir(), src, db2, "app.customers", pgtest.WeirdTable)
	})
	t.Run("schema with its functions, triggers and views, minus a table", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, filter.Selection{Schemas: []string{"app"}})
		want := pgtest.SchemaDump(t, c.BinDir(), src, "-n", "app")
		if got := pgtest.SchemaDump(t, c.BinDir(), db, "-n", "app"); got != want {
			t.Errorf("schema app differs:\n%s\nwant:\n%s", got, want)
		}
		pgtest.RequireData(t, src, db, "app.customers", "app.orders")
		db2 := fresh(t)
		restore(t, db2, filter.Selection{ExcludeSchemas: []string{"app"}, ExcludeTables: []string{"big"}})
		pgtest.OnlyRelations(t, db2, pgtest.WeirdTable, `"we""ird`+"\n"+`sch"."Other"`)
	})
	t.Run("exclusions keep everything else", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, filter.Selection{ExcludeSchemas: []string{`"we""ird` + "\n" + `sch"`}, ExcludeTableData: []string{"big"}})
		want := pgtest.SchemaDump(t, c.BinDir(), src, "-N", `"we""ird`+"\n"+`sch"`)
		if got := pgtest.SchemaDump(t, c.BinDir(), db); got != want {
			t.Errorf("schema differs from pg_dump -N's:\n%s\nwant:\n%s", got, want)
		}
		pgtest.RequireData(t, src, db, "app.customers", "app.orders")
		if rows := pgtest.Scalar(t, db, "SELECT count(*) FROM public.big"); rows != "0" {
			t.Errorf("--exclude-table-data: big has %s rows", rows)
		}
	})
	t.Run("chunked table from a pipe, other streams skipped", func(t *testing.T) {
		db := fresh(t)
		in, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		ctx := pgtest.Context(t)
		f, err := archivetest.OpenLocation(t, "-", in)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(ctx, f.Source, Options{Target: pgtest.Config(t, db), Where: f.String(), Jobs: 1,
			Filter: filter.Options{Selection: filter.Selection{Tables: []string{"public.big"}}}}); err != nil {
			t.Fatalf("restore from a pipe -t public.big: %v", err)
		}
		sameRelations(t, c.BinDir(), src, db, "public.big")
		pgtest.OnlyRelations(t, db, "public.big")
	})
	t.Run("one table back with --clean, the rest untouched", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, filter.Selection{})
		execSQL(t, db, `DELETE FROM `+pgtest.WeirdTable+` WHERE id % 3 = 0; UPDATE app.customers SET name = 'kept' WHERE id = 1`)
		restore(t, db, filter.Selection{Tables: []string{pgtest.WeirdTable}}, clean)
		// Its foreign key to a table already there is back too.
		execSQL(t, db, `UPDATE app.customers SET name = 'customer 1' WHERE id = 1`)
		pgtest.RequireSameSchema(t, c.BinDir(), src, db)
		pgtest.RequireSameData(t, src, db)
		// A table a view depends on cannot be dropped: refused, saying why.
		err := restoreFile(t, file, db, selecting(filter.Selection{Tables: []string{"app.orders"}}, clean))
		pgtest.RequireOneLineError(t, err, "view app.order_view depends on table app.orders")
		// Without --clean, an existing relation is refused before anything runs.
		err = restoreFile(t, file, db, selecting(filter.Selection{Tables: []string{"app.orders"}}))
		pgtest.RequireOneLineError(t, err, `already has "app"."orders"`)
		pgtest.RequireSameData(t, src, db)
	})
	t.Run("schema-only then data-only equals a full restore", func(t *testing.T) {
		db := fresh(t)
		restore(t, db, filter.Selection{SchemaOnly: true})
		if rows := pgtest.Scalar(t, db, "SELECT count(*) FROM app.orders"); rows != "0" {
			t.Fatalf("--schema-only loaded %s rows", rows)
		}
		restore(t, db, filter.Selection{DataOnly: true})
		pgtest.RequireSameSchema(t, c.BinDir(), src, db)
		pgtest.RequireSameData(t, src, db)
		pgtest.RequireOneLineError(t, restoreFile(t, file, db, selecting(filter.Selection{DataOnly: true})), "already has rows")
	})
	t.Run("data-only archive", func(t *testing.T) {
		data := filepath.Join(dir, "data.pgs")
		dumpFile(t, src, data, func(o *dump.Options) {
			o.Filter.Selection = filter.Selection{DataOnly: true, Tables: []string{"app.*"}}
		})
		db := fresh(t)
		restore(t, db, filter.Selection{SchemaOnly: true})
		mustRestore(t, data, db, nil)
		pgtest.RequireData(t, src, db, "app.customers", "app.orders", "app.orders_id_seq", "app.customers_id_seq")
		if rows := pgtest.Scalar(t, db, "SELECT count(*) FROM public.big"); rows != "0" {
			t.Errorf("table outside the data-only dump has %s rows", rows)
		}
	})
	t.Run("bad selections", func(t *testing.T) {
		db := fresh(t)
		for _, tc := range []struct {
			sel  filter.Selection
			edit func(*Options)
			msg  string
		}{
			{filter.Selection{Tables: []string{"nope"}}, nil, "no matching tables were found"},
			{filter.Selection{Schemas: []string{"nope"}}, nil, "no matching schemas were found"},
			{filter.Selection{Tables: []string{"other.app.orders"}}, nil, "cross-database references are not implemented"},
			{filter.Selection{DataOnly: true}, clean, "does not take --create or --clean"},
			// The archive decides (one dumped with --data-only or
			// --no-schema restores as data only).
			{filter.Selection{}, func(o *Options) { o.DisableTriggers = true }, "--data-only restores only"},
		} {
			var more []func(*Options)
			if tc.edit != nil {
				more = append(more, tc.edit)
			}
			pgtest.RequireOneLineError(t, restoreFile(t, file, db, selecting(tc.sel, more...)), tc.msg)
		}
		pgtest.OnlyRelations(t, db)
	})
}

// TestRestoreSelectionTorture restores the torture schema without some
// tables (one of them a partition, whose indexes are attached to the
// parent's) and checks the result against pg_dump's own selection with the
// same -T patterns: schema text equal, every other table's rows and every
// large object equal.
func TestRestoreSelectionTorture(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	src := c.ConnString(pgtest.TortureDB(t, c, "src"))
	file := filepath.Join(t.TempDir(), "torture.pgs")
	dumpFile(t, src, file, nil)
	dst := c.ConnString(pgtest.DB(t, c, "dst"))
	excluded := []string{"app.audit_log", `"dot.ted".*`, "app.measurements_default"}
	var args []string
	for _, p := range excluded {
		args = append(args, "-T", p)
	}
	// Pre-data split over both connections (--pre-data-split-min 1):
	// the selection is what each run restores.
	mustRestore(t, file, dst, selecting(filter.Selection{ExcludeTables: excluded}, func(o *Options) { o.PreDataSplitMin = 1 }))
	want := pgtest.SchemaDump(t, c.BinDir(), src, args...)
	if got := pgtest.SchemaDump(t, c.BinDir(), dst); got != want {
		t.Errorf("schema differs from pg_dump %v:\n%s", args, compare.SchemaDiff(want, got))
	}
	fa, fb := pgtest.Fingerprint(t, src), pgtest.Fingerprint(t, dst)
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
