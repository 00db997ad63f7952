package restore

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// newNotOurs starts a cluster with pgtest.NotOursSQL in database src and
// dumps it in 64 KiB blocks to DIR/good.pgs.
func newNotOurs(t *testing.T) (c *pgtest.Instance, src, file string) {
	t.Helper()
	c, src = pgtest.NewNotOurs(t)
	file = filepath.Join(t.TempDir(), "good.pgs")
	dumpFile(t, src, file, func(o *dump.Options) { o.BlockSize = 65536 })
	return c, src, file
}

// TestResumeRedoesOnlyItsOwnPreData: pre-data fails half-way (the owner of
// app.x is missing), leaving objects and a journal. --resume drops what
// that run created and finishes, because the journal records that the
// target was checked first. Under a journal without that record (as an
// older pgsprint, whose check counted only tables, left it: the reported
// case) --resume drops nothing and says why.
func TestResumeRedoesOnlyItsOwnPreData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, src, file := newNotOurs(t)
	for _, tc := range []struct {
		name    string
		db      string
		unvouch bool           // delete the journal's record of the check
		edit    func(*Options) // restore's flags
	}{
		{"journal vouches for the check", "vouched", false, nil},
		{"journal of an older pgsprint", "older", true, nil},
		// Pre-data split over two pg_restore runs at once: one fails, the
		// others stop, and pre-data is as unfinished as with one run.
		{"pre-data split over two connections", "split", false, func(o *Options) { o.Jobs, o.PreDataSplitMin = 2, 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.CreateDB(ctx, tc.db); err != nil {
				t.Fatal(err)
			}
			target := c.ConnString(tc.db)
			if err := c.Exec(ctx, "postgres", "ALTER ROLE notours_owner RENAME TO notours_gone"); err != nil {
				t.Fatal(err)
			}
			err := restoreFile(t, file, target, tc.edit)
			if err := c.Exec(ctx, "postgres", "ALTER ROLE notours_gone RENAME TO notours_owner"); err != nil {
				t.Fatal(err)
			}
			pgtest.RequireOneLineError(t, err, `role "notours_owner" does not exist`)
			if v := pgtest.Scalar(t, target, "SELECT count(*) FROM pgsprint_journal.steps WHERE step IN ('begin', 'target checked')"); v != "2" {
				t.Fatalf("journal of the failed run has %s of its two first rows", v)
			}
			if tc.unvouch {
				if err := c.Exec(ctx, tc.db, "DELETE FROM pgsprint_journal.steps WHERE step = 'target checked'"); err != nil {
					t.Fatal(err)
				}
			}
			before := pgtest.UserObjects(t, target)
			if !strings.Contains(strings.Join(before, ", "), "table app.x") {
				t.Fatalf("the failed pre-data left %v, not app.x", before)
			}
			err = restoreFile(t, file, target, func(o *Options) {
				o.Resume = true
				if tc.edit != nil {
					tc.edit(o)
				}
			})
			if tc.unvouch {
				pgtest.RequireOneLineError(t, err, "--resume will not drop objects that may be yours")
				if after := pgtest.UserObjects(t, target); strings.Join(after, ", ") != strings.Join(before, ", ") {
					t.Errorf("a refused resume changed the target: %v, was %v", after, before)
				}
				return
			}
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			pgtest.RequireSameSchema(t, c.BinDir(), src, target)
			pgtest.RequireSameData(t, src, target)
		})
	}
}

// TestPreDataSplitFailureStopsAll: pre-data split over two pg_restore runs
// at once (200 independent tables), one of which fails on a table whose
// owner is missing. Run fails with one line naming the statement, the
// other run is stopped (no pg_restore session stays in the target),
// pre-data is not journaled, and Resume (the role back) drops what was
// created and finishes equal to the source.
func TestPreDataSplitFailureStopsAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _, _ := newNotOurs(t)
	if err := c.CreateDB(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	var ddl strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&ddl, "CREATE TABLE w%03d (id int PRIMARY KEY, v text);\n", i)
	}
	ddl.WriteString("ALTER TABLE w150 OWNER TO notours_owner; INSERT INTO w001 VALUES (1, 'a');")
	if err := c.Exec(ctx, "wide", ddl.String()); err != nil {
		t.Fatal(err)
	}
	src := c.ConnString("wide")
	file := filepath.Join(t.TempDir(), "wide.pgs")
	dumpFile(t, src, file, nil)
	if err := c.CreateDB(ctx, "wide copy"); err != nil {
		t.Fatal(err)
	}
	target := c.ConnString("wide copy")
	split := func(o *Options) { o.Jobs, o.PreDataSplitMin = 2, 1 }
	if err := c.Exec(ctx, "postgres", "ALTER ROLE notours_owner RENAME TO notours_gone"); err != nil {
		t.Fatal(err)
	}
	err := restoreFile(t, file, target, split)
	if err := c.Exec(ctx, "postgres", "ALTER ROLE notours_gone RENAME TO notours_owner"); err != nil {
		t.Fatal(err)
	}
	pgtest.RequireOneLineError(t, err, "ALTER TABLE public.w150 OWNER TO notours_owner")
	// A killed pg_restore's backend ends once it finds its client gone.
	left := "?"
	for range 50 {
		if left = pgtest.Scalar(t, c.ConnString("postgres"), "SELECT count(*) FROM pg_stat_activity WHERE datname = 'wide copy' AND application_name = 'pg_restore'"); left == "0" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if left != "0" {
		t.Errorf("%s pg_restore sessions still in the target after the failure", left)
	}
	if v := pgtest.Scalar(t, target, "SELECT count(*) FROM pgsprint_journal.steps WHERE step = 'pre-data'"); v != "0" {
		t.Fatalf("the failed pre-data is journaled as done")
	}
	mustRestore(t, file, target, func(o *Options) { split(o); o.Resume = true })
	pgtest.RequireSameSchema(t, c.BinDir(), src, target)
	pgtest.RequireSameData(t, src, target)
}

// notOursCases are objects anyone may have created in a target database,
// each with the name the emptiness check (pg.UserObjects) gives it: a
// restore or a clone into a database holding one is refused, naming it.
var notOursCases = []struct {
	name string
	ddl  string
	want string
}{
	{"sequence of the archive's name", "CREATE SEQUENCE public.t1_id_seq; SELECT setval('public.t1_id_seq', 777)", "sequence public.t1_id_seq"},
	{"type", "CREATE TYPE public.color AS ENUM ('red')", "type public.color"},
	{"domain", "CREATE DOMAIN public.posint AS int CHECK (VALUE > 0)", "type public.posint"},
	{"function", "CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", "function public.answer()"},
	{"schema", "CREATE SCHEMA lonely", "schema lonely"},
	{"large object", "SELECT lo_create(4242)", "large object 4242"},
}

// TestRestoreNeverTouchesOthers: a target holding any object at all (here
// one sequence, type, function, schema or large object) is refused before
// anything is created, naming the object; it still holds exactly that
// object afterwards, and no journal. Resume is refused the same way (and
// clone, in internal/clone's TestCloneNeverTouchesOthers). A sequence of
// the archive's own name (the reported case) is replaced with Clean only.
// A partial restore refuses the sequences and schemas it would create, and
// still loads next to unrelated objects.
func TestRestoreNeverTouchesOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, src, file := newNotOurs(t)
	for i, tc := range notOursCases {
		t.Run(tc.name, func(t *testing.T) {
			db := "tgt" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			if err := c.Exec(ctx, db, tc.ddl); err != nil {
				t.Fatal(err)
			}
			target := c.ConnString(db)
			requireOnly := func(when string) {
				t.Helper()
				if got := pgtest.UserObjects(t, target); len(got) != 1 || got[0] != tc.want {
					t.Fatalf("%s: the target holds %v, want only %s", when, got, tc.want)
				}
			}
			requireOnly("before")
			for _, resume := range []bool{false, true} {
				err := restoreFile(t, file, target, func(o *Options) { o.Resume = resume })
				pgtest.RequireOneLineError(t, err, "is not empty: it holds "+tc.want)
				requireOnly(fmt.Sprintf("restore with resume %v", resume))
			}
			if tc.want == "sequence public.t1_id_seq" {
				if v := pgtest.Scalar(t, target, "SELECT last_value FROM public.t1_id_seq"); v != "777" {
					t.Fatalf("the user's sequence is at %s, was 777", v)
				}
				mustRestore(t, file, target, func(o *Options) { o.Clean = true })
				pgtest.RequireSameSchema(t, c.BinDir(), src, target)
				pgtest.RequireSameData(t, src, target)
			}
		})
	}

	for i, tc := range []struct {
		name   string
		ddl    string
		edit   func(*Options)
		errSub string // empty: the restore must succeed
		keep   []string
	}{
		{"-t of a table whose sequence exists", "CREATE SEQUENCE public.t1_id_seq", func(o *Options) { o.Filter.Tables = []string{"t1"} },
			`already has "public"."t1_id_seq"`, []string{"sequence public.t1_id_seq"}},
		{"-n of a schema that exists", "CREATE SCHEMA app", func(o *Options) { o.Filter.Schemas = []string{"app"} },
			"already has schema app", []string{"schema app"}},
		{"-t next to unrelated objects", "CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", func(o *Options) { o.Filter.Tables = []string{"t1"} }, "",
			[]string{"function public.answer()", "sequence public.t1_id_seq", "table public.t1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "part" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			if err := c.Exec(ctx, db, tc.ddl); err != nil {
				t.Fatal(err)
			}
			target := c.ConnString(db)
			err := restoreFile(t, file, target, tc.edit)
			if tc.errSub != "" {
				pgtest.RequireOneLineError(t, err, tc.errSub)
			} else if err != nil {
				t.Fatalf("restore: %v", err)
			}
			got := pgtest.UserObjects(t, target)
			sort.Strings(got)
			if strings.Join(got, ", ") != strings.Join(tc.keep, ", ") {
				t.Errorf("the target holds %v, want %v", got, tc.keep)
			}
			if tc.errSub == "" {
				pgtest.RequireData(t, src, target, "public.t1")
			}
		})
	}
}
