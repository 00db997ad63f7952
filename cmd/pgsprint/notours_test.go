package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// newNotOurs starts a cluster with pgtest.NotOursSQL in database src and dumps it
// in 64 KiB blocks to DIR/good.pgs.
func newNotOurs(t *testing.T) (c *pgtest.Instance, src, file string) {
	t.Helper()
	ctx := context.Background()
	c = pgtest.New(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", pgtest.NotOursSQL()); err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(t.TempDir(), "good.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("src"), "-f", file, "--block-size", "65536", "-q")
	return c, c.ConnString("src"), file
}

// TestToSQLAllOrNothing pipes restore --to-sql of damaged archives into a
// real psql: pgsprint exits 1 and the target is left holding nothing at
// all, not even the tables created before the damage was met, and no row.
// The script cut inside a COPY block (pgsprint killed) and inside pre-data
// commits nothing either. The undamaged archive still loads exactly.
func TestToSQLAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, src, good := newNotOurs(t)
	archive, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(good)
	damaged := func(name string, data []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flip := func(at int) []byte {
		d := append([]byte(nil), archive...)
		d[at] ^= 0x01
		return d
	}
	psql := filepath.Join(c.BinDir(), "psql")
	for i, tc := range []struct {
		name string
		file string
		psql []string // extra psql flags
		// errSub is in pgsprint's error; empty: it must succeed.
		errSub string
		// raised: the script reached the rows and ended in the statement
		// that fails instead of COMMIT.
		raised bool
	}{
		{"undamaged", good, nil, "", false},
		{"byte flipped in a data frame", damaged("half.pgs", flip(len(archive)/2)), nil, "corrupted archive", true},
		{"byte flipped in an early data frame", damaged("third.pgs", flip(len(archive)/3)), nil, "corrupted archive", true},
		{"byte flipped, psql --single-transaction", damaged("half.pgs", flip(len(archive)/2)), []string{"--single-transaction"}, "corrupted archive", true},
		{"truncated", damaged("cut.pgs", archive[:len(archive)*2/3]), nil, "incomplete", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "sq" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			res := runPipeline(t, []string{"pgsprint", "restore", "-f", tc.file, "--to-sql"},
				append([]string{psql, "-X", "-q", "-d", c.ConnString(db)}, tc.psql...))
			t.Logf("psql exit %d: %s", res[1].code, strings.TrimSpace(res[1].stderr))
			if tc.errSub == "" {
				if res[0].code != 0 || res[1].code != 0 {
					t.Fatalf("pgsprint exit %d, psql exit %d:\n%s\n%s", res[0].code, res[1].code, res[0].stderr, res[1].stderr)
				}
				pgtest.RequireSameSchema(t, c.BinDir(), src, c.ConnString(db))
				pgtest.RequireSameData(t, src, c.ConnString(db))
				return
			}
			checkOneError(t, res[0].code, exitFailure, res[0].stderr, tc.errSub)
			if got := strings.Contains(res[1].stderr, "pgsprint could not read the archive to its end"); got != tc.raised {
				t.Errorf("psql met the script's failing end: %v, want %v; psql said:\n%s", got, tc.raised, res[1].stderr)
			}
			if tc.raised && res[1].code == 0 {
				t.Error("psql exited 0 on a script that ends in an error")
			}
			if objs := userObjects(t, c.ConnString(db)); len(objs) > 0 {
				t.Errorf("the target holds %v after a failed --to-sql", objs)
			}
		})
	}

	// pgsprint killed: the script just ends, wherever it was.
	script := mustPgsprint(t, "restore", "-f", good, "--to-sql").stdout
	copyAt := strings.Index(script, `COPY "public"."t1"`)
	createAt := strings.Index(script, "CREATE TABLE app.x")
	if copyAt < 0 || createAt < 0 || !strings.HasSuffix(script, "COMMIT;\n") || !strings.Contains(script, "\nBEGIN;\n") {
		t.Fatalf("script without the expected statements:\n%.2000s", script)
	}
	for i, cut := range []struct {
		name string
		at   int
	}{
		{"script cut inside a row of a COPY block", copyAt + 500000 + 7},
		{"script cut inside pre-data", createAt + 10},
	} {
		t.Run(cut.name, func(t *testing.T) {
			db := "cut" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			part := script[:cut.at]
			if strings.HasSuffix(part, "\n") {
				t.Fatal("the cut falls on a line end: it proves less")
			}
			in := damaged(db+".sql", []byte(part))
			res := runPipeline(t, []string{"cat", in}, []string{psql, "-X", "-q", "-d", c.ConnString(db)})
			t.Logf("psql exit %d: %s", res[1].code, strings.TrimSpace(res[1].stderr))
			if objs := userObjects(t, c.ConnString(db)); len(objs) > 0 {
				t.Errorf("the target holds %v after a cut script", objs)
			}
		})
	}
}

// TestRestoreNeverTouchesOthers: a target holding any object at all (here
// one sequence, type, function, schema or large object) is refused before
// anything is created, naming the object; it still holds exactly that
// object afterwards, and no journal. --resume and clone are refused the
// same way. A sequence of the archive's own name (the reported case) is
// replaced with --clean only. A partial restore refuses the sequences and
// schemas it would create, and still loads next to unrelated objects.
func TestRestoreNeverTouchesOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, src, file := newNotOurs(t)
	for i, tc := range []struct {
		name string
		ddl  string
		want string // the object as the error and pg.UserObjects name it
	}{
		{"sequence of the archive's name", "CREATE SEQUENCE public.t1_id_seq; SELECT setval('public.t1_id_seq', 777)", "sequence public.t1_id_seq"},
		{"type", "CREATE TYPE public.color AS ENUM ('red')", "type public.color"},
		{"domain", "CREATE DOMAIN public.posint AS int CHECK (VALUE > 0)", "type public.posint"},
		{"function", "CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", "function public.answer()"},
		{"schema", "CREATE SCHEMA lonely", "schema lonely"},
		{"large object", "SELECT lo_create(4242)", "large object 4242"},
	} {
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
				if got := userObjects(t, target); len(got) != 1 || got[0] != tc.want {
					t.Fatalf("%s: the target holds %v, want only %s", when, got, tc.want)
				}
			}
			requireOnly("before")
			for _, args := range [][]string{
				{"restore", "-f", file, "-d", target, "-q"},
				{"restore", "-f", file, "-d", target, "-q", "--resume"},
				{"clone", "--source", src, "--target", target, "-q"},
			} {
				r := pgsprint(t, nil, args...)
				checkOneError(t, r.code, exitFailure, r.stderr, "is not empty: it holds "+tc.want)
				requireOnly(args[0] + " " + args[len(args)-1])
			}
			if tc.want == "sequence public.t1_id_seq" {
				if v := scalar(t, target, "SELECT last_value FROM public.t1_id_seq"); v != "777" {
					t.Fatalf("the user's sequence is at %s, was 777", v)
				}
				mustPgsprint(t, "restore", "-f", file, "-d", target, "--clean", "-q")
				pgtest.RequireSameSchema(t, c.BinDir(), src, target)
				pgtest.RequireSameData(t, src, target)
			}
		})
	}

	for i, tc := range []struct {
		name   string
		ddl    string
		args   []string
		errSub string // empty: the restore must succeed
		keep   []string
	}{
		{"-t of a table whose sequence exists", "CREATE SEQUENCE public.t1_id_seq", []string{"-t", "t1"}, `already has "public"."t1_id_seq"`, []string{"sequence public.t1_id_seq"}},
		{"-n of a schema that exists", "CREATE SCHEMA app", []string{"-n", "app"}, "already has schema app", []string{"schema app"}},
		{"-t next to unrelated objects", "CREATE FUNCTION public.answer() RETURNS int LANGUAGE sql AS 'SELECT 42'", []string{"-t", "t1"}, "",
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
			r := pgsprint(t, nil, append([]string{"restore", "-f", file, "-d", target, "-q"}, tc.args...)...)
			if tc.errSub != "" {
				checkOneError(t, r.code, exitFailure, r.stderr, tc.errSub)
			} else if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			got := userObjects(t, target)
			sort.Strings(got)
			if strings.Join(got, ", ") != strings.Join(tc.keep, ", ") {
				t.Errorf("the target holds %v, want %v", got, tc.keep)
			}
			if tc.errSub == "" {
				requireData(t, src, target, "public.t1")
			}
		})
	}
}

// TestPreDataSplitFailureStopsAll: pre-data split over two pg_restore runs
// at once (200 independent tables), one of which fails on a table whose
// owner is missing. pgsprint exits 1 with one line naming the statement,
// the other run is stopped (no pg_restore session stays in the target),
// pre-data is not journaled, and --resume (the role back) drops what was
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
	mustPgsprint(t, "dump", "-d", src, "-f", file, "-q")
	if err := c.CreateDB(ctx, "wide copy"); err != nil {
		t.Fatal(err)
	}
	target := c.ConnString("wide copy")
	args := []string{"restore", "-f", file, "-d", target, "-j", "2", "--pre-data-split-min", "1", "-q"}
	if err := c.Exec(ctx, "postgres", "ALTER ROLE notours_owner RENAME TO notours_gone"); err != nil {
		t.Fatal(err)
	}
	r := pgsprint(t, nil, args...)
	if err := c.Exec(ctx, "postgres", "ALTER ROLE notours_gone RENAME TO notours_owner"); err != nil {
		t.Fatal(err)
	}
	checkOneError(t, r.code, exitFailure, r.stderr, "ALTER TABLE public.w150 OWNER TO notours_owner")
	// A killed pg_restore's backend ends once it finds its client gone.
	left := "?"
	for range 50 {
		if left = scalar(t, c.ConnString("postgres"), "SELECT count(*) FROM pg_stat_activity WHERE datname = 'wide copy' AND application_name = 'pg_restore'"); left == "0" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if left != "0" {
		t.Errorf("%s pg_restore sessions still in the target after the failure", left)
	}
	if v := scalar(t, target, "SELECT count(*) FROM pgsprint_journal.steps WHERE step = 'pre-data'"); v != "0" {
		t.Fatalf("the failed pre-data is journaled as done")
	}
	mustPgsprint(t, append(args, "--resume")...)
	pgtest.RequireSameSchema(t, c.BinDir(), src, target)
	pgtest.RequireSameData(t, src, target)
}

// TestJournalLeftInSource: a source server that holds what unfinished
// pgsprint runs leave behind, a database with the journal of a failed
// restore (schema pgsprint_journal) and the server journal of a
// whole-server restore (role pgsprint_restore_journal), is dumped with a
// warning naming the database, and the journals stay out: restore --all
// and clone --all --clean of it succeed (they once failed with "schema
// already exists" and "role already exists"), leaving no journal, with the
// half-restored database's rows as they are. Its own clusters: restore
// --all and clone --all write every database and the roles.
func TestJournalLeftInSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := pgtest.New(t), pgtest.New(t)
	for _, db := range []string{"orig", "left"} {
		if err := src.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Exec(ctx, "orig", `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 100);
CREATE TABLE u (id int PRIMARY KEY, t int REFERENCES t); INSERT INTO u SELECT i, i FROM generate_series(1, 10) i;`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pgs")
	mustPgsprint(t, "dump", "-d", src.ConnString("orig"), "-f", good, "-q")
	// A restore whose -L list keeps u's foreign key but not t's rows
	// fails after pre-data, leaving "left" with its journal.
	var keep []string
	for _, l := range strings.Split(mustPgsprint(t, "restore", "-f", good, "-l").stdout, "\n") {
		if !strings.Contains(l, "TABLE DATA public t ") {
			keep = append(keep, l)
		}
	}
	list := filepath.Join(dir, "no-t.list")
	if err := os.WriteFile(list, []byte(strings.Join(keep, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := pgsprint(t, nil, "restore", "-f", good, "-L", list, "-d", src.ConnString("left"), "-q"); r.code != exitFailure {
		t.Fatalf("the -L restore meant to fail: exit %d\n%s", r.code, r.stderr)
	}
	if got := fmt.Sprint(userObjects(t, src.ConnString("left"))); !strings.Contains(got, "schema pgsprint_journal") {
		t.Fatalf("the failed restore left no journal: %s", got)
	}
	// The server journal of a whole-server restore killed on the source.
	conn, err := pgx.Connect(ctx, src.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.CreateCluster(ctx, tx, "an archive restored on the source", false); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	all := filepath.Join(dir, "all.pgs")
	r := pgsprint(t, nil, "dump", "--all", "-d", src.ConnString("postgres"), "-f", all)
	if r.code != 0 || !strings.Contains(r.stderr, "holds the journal of an unfinished pgsprint restore or clone") || !strings.Contains(r.stderr, "database=left") {
		t.Errorf("dump --all: exit %d, want 0 and a warning naming database left:\n%s", r.code, r.stderr)
	}
	if l := mustPgsprint(t, "list", all).stdout; strings.Contains(l, "pgsprint_journal") {
		t.Errorf("the archive lists the journal:\n%s", l)
	}
	check := func(how string) {
		t.Helper()
		for _, db := range []string{"orig", "left"} {
			requireData(t, src.ConnString(db), dst.ConnString(db), "public.t", "public.u")
			c, err := pgx.Connect(ctx, dst.ConnString(db))
			if err != nil {
				t.Fatal(err)
			}
			requireNoJournal(t, c)
			c.Close(ctx)
		}
		if n := scalar(t, dst.ConnString("postgres"), "SELECT count(*) FROM pg_roles WHERE rolname = '"+journal.ClusterRole+"'"); n != "0" {
			t.Errorf("%s left role %s on the target", how, journal.ClusterRole)
		}
	}
	mustPgsprint(t, "restore", "--all", "-f", all, "-d", dst.ConnString("postgres"), "-q")
	check("restore --all")
	mustPgsprint(t, "clone", "--all", "--source", src.ConnString("postgres"), "--target", dst.ConnString("postgres"), "--clean", "-q")
	check("clone --all --clean")
}
