package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// flagsExtraDDL adds to the torture schema what pg_dump's object flags act
// on and torture lacks: a publication, a subscription (not connected), a
// column with a TOAST compression method, a table of another access
// method, an unused extension and a table for the snapshot case.
const flagsExtraDDL = `
CREATE PUBLICATION flags_pub FOR TABLE app.orders;
CREATE SUBSCRIPTION flags_sub CONNECTION 'dbname=nowhere' PUBLICATION flags_pub WITH (connect = false, slot_name = NONE);
CREATE TABLE public.toasty (id int, body text COMPRESSION pglz);
CREATE ACCESS METHOD heap_two TYPE TABLE HANDLER heap_tableam_handler;
CREATE TABLE public.other_am (id int) USING heap_two;
CREATE EXTENSION tablefunc;
CREATE TABLE public.snap (id int);
CREATE ROLE pgsprint_flags_owner SUPERUSER NOLOGIN;
ANALYZE;
`

// pg18 starts a PostgreSQL 18 cluster: pg_dump and pg_restore 18 are the
// reference for their flags (--no-data, --statistics-only, --no-policies,
// ...) and 17's (--filter, --exclude-extension, --transaction-size).
func pg18(t *testing.T) *pgtest.Instance {
	t.Helper()
	dir, err := pgtest.BinDirFor(18)
	if err != nil {
		t.Fatal(err)
	}
	return pgtest.New(t, pgtest.Options{BinDir: dir, Settings: map[string]string{"autovacuum": "off"}})
}

// pg17 starts a PostgreSQL 17 cluster: pg_dump 17 is the reference for
// --filter and --exclude-extension.
func pg17(t *testing.T) *pgtest.Instance {
	t.Helper()
	dir, err := pgtest.BinDirFor(17)
	if err != nil {
		t.Fatal(err)
	}
	return pgtest.New(t, pgtest.Options{BinDir: dir})
}

// createdTables is the set of tables a schema script creates, by the
// names pg_dump prints.
func createdTables(script string) []string {
	re := regexp.MustCompile(`(?ms)^CREATE (?:UNLOGGED |FOREIGN )?TABLE (.*?) (?:\(|PARTITION OF )`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(script, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

// TestPgFlags checks each pg_dump/pg_restore flag pgsprint takes against
// the torture schema the way pg_dump's own selection is checked: the
// result's pg_dump --schema-only equals pg_dump --schema-only with the same
// flag of the source. Restore flags share one archive; dump and clone
// flags make their own. Closed pipes, compare -h and the size counters
// use the same cluster and archive.
func TestPgFlags(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pg18(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	pgtest.LoadTorture(t, c, "src")
	if err := c.ExecPsql(ctx, "src", flagsExtraDDL); err != nil {
		t.Fatal(err)
	}
	src := c.ConnString("src")
	tmp := t.TempDir()
	all := filepath.Join(tmp, "all.pgs")
	mustPgsprint(t, "dump", "-d", src, "-f", all, "-j", "2", "-q", "--summary-json", filepath.Join(tmp, "dump.json"))
	// The flag cases run in parallel: n and references are shared.
	var mu sync.Mutex
	n := 0
	fresh := func(t *testing.T) string {
		t.Helper()
		mu.Lock()
		n++
		db := "dst" + strconv.Itoa(n)
		mu.Unlock()
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		return db
	}
	schema := func(t *testing.T, conn string, args ...string) string {
		t.Helper()
		return pgtest.SchemaDump(t, c.BinDir(), conn, args...)
	}
	query := func(t *testing.T, db, sql string) string {
		t.Helper()
		conn, err := pgx.Connect(ctx, c.ConnString(db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var s string
		if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return s
	}

	// appStats is the optimizer statistics of schema app: what pg_dump 18
	// carries.
	appStats := func(t *testing.T, db string) string {
		t.Helper()
		return query(t, db, "SELECT count(*) || ' ' || coalesce(sum(hashtext(s::text)), 0) FROM pg_stats s WHERE schemaname = 'app'")
	}
	sameStats := func(t *testing.T, db string) {
		t.Helper()
		if got, want := appStats(t, db), appStats(t, "src"); got != want || strings.HasPrefix(want, "0 ") {
			t.Errorf("pg_stats of schema app: %s, the source's %s", got, want)
		}
	}
	rows := func(t *testing.T, db, table string) string {
		t.Helper()
		return query(t, db, "SELECT count(*)::text FROM "+table)
	}
	sequence := func(t *testing.T, db string) string {
		t.Helper()
		return query(t, db, "SELECT last_value || ' ' || is_called FROM app.weird_seq")
	}
	largeObjects := func(t *testing.T, db string) string {
		t.Helper()
		return query(t, db, "SELECT count(*)::text FROM pg_largeobject_metadata")
	}
	sameData := func(t *testing.T, db string) {
		t.Helper()
		if d := compare.FingerprintDiff(pgtest.Fingerprint(t, src), pgtest.Fingerprint(t, c.ConnString(db))); len(d) > 0 {
			t.Errorf("data differs from the source's: %v", d)
		}
	}
	// schemaFirst creates the archive's schema in db, for the flags that
	// load into existing tables.
	schemaFirst := func(t *testing.T, db string) {
		t.Helper()
		mustPgsprint(t, "restore", "-f", all, "-d", c.ConnString(db), "-q", "-s")
	}

	// reference restores the source's schema the way pg_dump and
	// pg_restore do with the equivalent flags, into a database of its own.
	// Rows whose flags are the same for pg_dump and pg_restore share one
	// reference.
	references := map[string]string{}
	reference := func(t *testing.T, pgdump, pgrestore []string) string {
		t.Helper()
		key := strings.Join(pgdump, "\x00") + "\x01" + strings.Join(pgrestore, "\x00")
		mu.Lock()
		s, ok := references[key]
		mu.Unlock()
		if ok {
			return s
		}
		db := fresh(t)
		file := filepath.Join(tmp, db+".dump")
		args := []string{"--format=custom", "--file=" + file, "--dbname=" + src}
		if !strings.Contains(strings.Join(pgdump, " "), "--section") {
			args = append(args, "--schema-only")
		}
		if out, err := exec.Command(filepath.Join(c.BinDir(), "pg_dump"), append(args, pgdump...)...).CombinedOutput(); err != nil {
			t.Fatalf("pg_dump %v: %v\n%s", pgdump, err, out)
		}
		args = []string{"--exit-on-error", "--dbname=" + c.ConnString(db)}
		if out, err := exec.Command(filepath.Join(c.BinDir(), "pg_restore"), append(append(args, pgrestore...), file)...).CombinedOutput(); err != nil {
			t.Fatalf("pg_restore %v: %v\n%s", pgrestore, err, out)
		}
		s = schema(t, c.ConnString(db))
		mu.Lock()
		references[key] = s
		mu.Unlock()
		return s
	}
	plain := reference(t, nil, nil)

	for _, tc := range []struct {
		name      string
		cmd       string   // restore (of the shared archive), dump (then restore) or clone
		args      []string // pgsprint's flags
		pgdump    []string // pg_dump's equivalent, for the reference
		pgrestore []string // pg_restore's equivalent, for the reference
		same      bool     // the flag changes nothing in this source's schema
		restore   []string // more flags for the restore of a dump
		prepare   func(t *testing.T, db string)
		check     func(t *testing.T, db string)
		// spy, for a restore, runs it with a pg_restore that records its
		// arguments (spyPgRestore) and asserts it was given this flag.
		spy string
		// server: the case changes the whole server (a role), so it runs
		// alone, before the others, which run in parallel.
		server bool
		// longOnly: under `make test-long` only. Clone's flags are
		// registered by the functions dump's and restore's are
		// (registerSettingsFlags, registerFilterFlags, compatFlags) and
		// reach its dump and restore stages through the options those
		// embed; make test keeps a clone case of each side's filter flags
		// and of the statistics, the dump and restore cases prove each
		// flag's effect. A dump's --section, --no-data and
		// --statistics-only reach its one pg_dump run as pg_dump's own
		// flags, and keep the table data out of the archive as
		// --schema-only does: make test keeps their restore cases, dump
		// --schema-only --sequence-data and dump --no-schema.
		longOnly bool
	}{
		// One run for several flags, each of which changes the schema
		// in its own way, so a flag lost on the way shows in the
		// comparison: --no-comments and --no-policies drop objects,
		// --no-publications and --no-subscriptions one each,
		// --no-table-access-method a clause.
		{name: "restore --no-comments --no-publications --no-subscriptions --no-table-access-method --no-policies", cmd: "restore",
			args:      []string{"--no-comments", "--no-publications", "--no-subscriptions", "--no-table-access-method", "--no-policies"},
			pgrestore: []string{"--no-comments", "--no-publications", "--no-subscriptions", "--no-table-access-method", "--no-policies"},
			check: func(t *testing.T, db string) {
				if am := query(t, db, "SELECT a.amname::text FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'public.other_am'::regclass"); am != "heap" {
					t.Errorf("other_am uses %s, want the default heap", am)
				}
			}},
		{name: "restore --section pre-data --section post-data", cmd: "restore", args: []string{"--section", "pre-data", "--section", "post-data"},
			pgrestore: []string{"--section=pre-data", "--section=post-data"}, same: true,
			check: func(t *testing.T, db string) {
				if rows := query(t, db, "SELECT count(*)::text FROM app.orders"); rows != "0" {
					t.Errorf("schema sections restored %s rows", rows)
				}
			}},
		{name: "restore --role -O --clean --if-exists -e", cmd: "restore", args: []string{"--role", "pgsprint_flags_owner", "-O", "--clean", "--if-exists", "-e"},
			pgrestore: []string{"--role=pgsprint_flags_owner", "--no-owner"},
			check: func(t *testing.T, db string) {
				// Tables come from pg_restore (a child), indexes from
				// pgsprint's own connections: both took the role.
				if n := query(t, db, `SELECT count(*)::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
					WHERE n.nspname = 'app' AND c.relkind IN ('r', 'i', 'p') AND c.relowner <> 'pgsprint_flags_owner'::regrole`); n != "0" {
					t.Errorf("%s relations of app not owned by the --role", n)
				}
			}},
		// One dump for four flags, each of which changes the schema: --no-
		// publications and --no-subscriptions drop the two objects,
		// --no-toast-compression a column's clause, --exclude-extension one
		// extension, so a flag lost on the way shows in the comparison.
		{name: "dump --no-publications --no-subscriptions --no-toast-compression --exclude-extension --no-policies", cmd: "dump",
			args:   []string{"--no-publications", "--no-subscriptions", "--no-toast-compression", "--exclude-extension", "tablefunc", "--no-policies"},
			pgdump: []string{"--no-publications", "--no-subscriptions", "--no-toast-compression", "--exclude-extension=tablefunc", "--no-policies"}},
		{name: "dump --section pre-data", cmd: "dump", longOnly: true, args: []string{"--section", "pre-data"}, pgdump: []string{"--section=pre-data"}},
		{name: "clone --no-comments --no-policies", cmd: "clone", args: []string{"--no-comments", "--no-policies"}, pgdump: []string{"--no-comments", "--no-policies"}},
		// PostgreSQL 18's flags, against pg_dump and pg_restore 18.
		// --no-data is --schema-only that keeps the statistics: the
		// empty tables get the source's, as pg_restore --no-data gives them.
		{name: "restore --no-data", cmd: "restore", args: []string{"--no-data"}, pgrestore: []string{"--no-data"}, same: true,
			check: func(t *testing.T, db string) {
				if n := rows(t, db, "app.orders"); n != "0" {
					t.Errorf("--no-data restored %s rows", n)
				}
				sameStats(t, db)
			}},
		{name: "dump --no-data", cmd: "dump", longOnly: true, args: []string{"--no-data"}, pgdump: []string{"--no-data"}, same: true,
			check: func(t *testing.T, db string) {
				if n, lo := rows(t, db, "app.orders"), largeObjects(t, db); n != "0" || lo != "0" {
					t.Errorf("--no-data dumped %s rows, %s large objects", n, lo)
				}
				sameStats(t, db)
			}},
		{name: "clone --no-data", cmd: "clone", longOnly: true, args: []string{"--no-data"}, pgdump: []string{"--no-data"}, same: true,
			check: func(t *testing.T, db string) {
				if n := rows(t, db, "app.orders"); n != "0" {
					t.Errorf("--no-data cloned %s rows", n)
				}
				sameStats(t, db)
			}},
		// --no-schema and --statistics-only load into existing tables:
		// the archive's schema is created first, and the result must be
		// what pg_restore's same flag leaves, the source's rows and
		// statistics (--no-schema) or its statistics alone.
		{name: "restore --no-schema", cmd: "restore", args: []string{"--no-schema", "--disable-triggers"}, same: true, prepare: schemaFirst,
			check: func(t *testing.T, db string) {
				sameData(t, db)
				sameStats(t, db)
			}},
		{name: "dump --no-schema", cmd: "dump", args: []string{"--no-schema"}, restore: []string{"--disable-triggers"}, same: true, prepare: schemaFirst,
			check: func(t *testing.T, db string) {
				sameData(t, db)
				sameStats(t, db)
			}},
		{name: "restore --statistics-only", cmd: "restore", args: []string{"--statistics-only"}, same: true, prepare: schemaFirst,
			check: func(t *testing.T, db string) {
				if n := rows(t, db, "app.orders"); n != "0" {
					t.Errorf("--statistics-only restored %s rows", n)
				}
				sameStats(t, db)
			}},
		{name: "dump --statistics-only", cmd: "dump", longOnly: true, args: []string{"--statistics-only"}, same: true, prepare: schemaFirst,
			check: func(t *testing.T, db string) {
				if n := rows(t, db, "app.orders"); n != "0" {
					t.Errorf("--statistics-only dumped %s rows", n)
				}
				sameStats(t, db)
			}},
		{name: "clone --statistics-only -t app.orders", cmd: "clone", args: []string{"--statistics-only", "-t", "app.orders"}, same: true, prepare: schemaFirst,
			check: func(t *testing.T, db string) {
				if got, want := query(t, db, "SELECT count(*)::text FROM pg_stats WHERE schemaname = 'app' AND tablename <> 'orders'"), "0"; got != want {
					t.Errorf("-t app.orders --statistics-only brought %s other tables' statistics", got)
				}
				if got, want := query(t, db, "SELECT count(*)::text FROM pg_stats WHERE schemaname = 'app' AND tablename = 'orders'"),
					query(t, "src", "SELECT count(*)::text FROM pg_stats WHERE schemaname = 'app' AND tablename = 'orders'"); got != want || want == "0" {
					t.Errorf("app.orders has %s rows of pg_stats, the source %s", got, want)
				}
			}},
		{name: "dump --schema-only --sequence-data", cmd: "dump", args: []string{"--schema-only", "--sequence-data"}, pgdump: []string{"--sequence-data"}, same: true,
			check: func(t *testing.T, db string) {
				if got, want := sequence(t, db), sequence(t, "src"); got != want {
					t.Errorf("app.weird_seq is %s, the source's %s", got, want)
				}
			}},
		{name: "clone --schema-only --sequence-data", cmd: "clone", longOnly: true, args: []string{"--schema-only", "--sequence-data"}, pgdump: []string{"--sequence-data"}, same: true,
			check: func(t *testing.T, db string) {
				if got, want := sequence(t, db), sequence(t, "src"); got != want {
					t.Errorf("app.weird_seq is %s, the source's %s", got, want)
				}
			}},
		{name: "dump --no-unlogged-table-data -B", cmd: "dump", args: []string{"--no-unlogged-table-data", "-B"}, pgdump: []string{"--no-unlogged-table-data", "-B"}, same: true,
			check: func(t *testing.T, db string) {
				if n, logged, lo := rows(t, db, "app.cache"), rows(t, db, "app.orders"), largeObjects(t, db); n != "0" || logged == "0" || lo != "0" {
					t.Errorf("unlogged app.cache has %s rows (want 0), app.orders %s (want some), %s large objects (want 0)", n, logged, lo)
				}
			}},
		{name: "clone --no-unlogged-table-data -B", cmd: "clone", longOnly: true, args: []string{"--no-unlogged-table-data", "--no-blobs"}, pgdump: []string{"--no-unlogged-table-data", "-B"}, same: true,
			check: func(t *testing.T, db string) {
				if n, lo := rows(t, db, "app.cache"), largeObjects(t, db); n != "0" || lo != "0" {
					t.Errorf("unlogged app.cache has %s rows (want 0), %s large objects (want 0)", n, lo)
				}
			}},
		// Ownership set by SET SESSION AUTHORIZATION: torture's tables
		// owned by pgtest_owner keep their owner, and pg_restore was told.
		{name: "restore --use-set-session-authorization", cmd: "restore", args: []string{"--use-set-session-authorization"},
			same: true, spy: "--use-set-session-authorization", server: true,
			// As with pg_restore, each owner creates its own objects, in
			// schemas it may not create in until the archive's GRANTs run:
			// the owner is a superuser for this case.
			prepare: func(t *testing.T, db string) {
				if err := c.Exec(ctx, db, "ALTER ROLE pgtest_owner SUPERUSER"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := c.Exec(ctx, db, "ALTER ROLE pgtest_owner NOSUPERUSER"); err != nil {
						t.Error(err)
					}
				})
			},
			check: func(t *testing.T, db string) {
				for _, rel := range []string{"app.forced", "app.circ_b", `"dot.ted"."tab.le"`} {
					if got := query(t, db, "SELECT relowner::regrole::text FROM pg_class WHERE oid = '"+rel+"'::regclass"); got != "pgtest_owner" {
						t.Errorf("%s is owned by %s, want pgtest_owner", rel, got)
					}
				}
			}},
		{name: "restore --transaction-size", cmd: "restore", args: []string{"--transaction-size", "3"}, pgrestore: []string{"--transaction-size=3"}, same: true,
			check: func(t *testing.T, db string) { sameData(t, db) }},
		{name: "clone --transaction-size", cmd: "clone", longOnly: true, args: []string{"--transaction-size", "1"}, pgrestore: []string{"--transaction-size=1"}, same: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.longOnly && !long {
				t.Skip("under make test-long only: its twin proves the flag (see longOnly)")
			}
			if !tc.server {
				t.Parallel()
			}
			db := fresh(t)
			if tc.prepare != nil {
				tc.prepare(t, db)
			}
			switch tc.cmd {
			case "restore":
				// Pre-data split over both connections: every run takes the flags.
				args := append([]string{"restore", "-f", all, "-d", c.ConnString(db), "-j", "2", "-q", "--pre-data-split-min", "1"}, tc.args...)
				if tc.spy == "" {
					mustPgsprint(t, args...)
					break
				}
				env, calls := spyPgRestore(t, c.BinDir())
				if r := pgsprint(t, env, args...); r.code != 0 {
					t.Fatalf("pgsprint %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
				}
				// Every pg_restore that restores into the target, or writes
				// a script of entries that psql then runs (--use-list),
				// took the flag; a run whose script is only parsed need not.
				restores := 0
				for _, l := range strings.Split(calls(), "\n") {
					if !strings.Contains(l, " --dbname=") && !strings.Contains(l, " --use-list=") {
						continue
					}
					restores++
					if !strings.Contains(l, " "+tc.spy+" ") {
						t.Errorf("pg_restore ran without %s:%s", tc.spy, l)
					}
				}
				if restores == 0 || !strings.Contains(calls(), " --dbname=") {
					t.Errorf("no pg_restore into the target was recorded:\n%s", calls())
				}
			case "dump":
				file := filepath.Join(tmp, db+".pgs")
				mustPgsprint(t, append([]string{"dump", "-d", src, "-f", file, "-j", "2", "-q"}, tc.args...)...)
				mustPgsprint(t, append([]string{"restore", "-f", file, "-d", c.ConnString(db), "-j", "2", "-q"}, tc.restore...)...)
			case "clone":
				mustPgsprint(t, append([]string{"clone", "--source", src, "--target", c.ConnString(db), "-j", "2", "-q"}, tc.args...)...)
			}
			want := reference(t, tc.pgdump, tc.pgrestore)
			if d := compare.SchemaDiff(want, schema(t, c.ConnString(db))); d != "" {
				t.Errorf("schema differs from pg_dump %v | pg_restore %v (- pg_dump, + pgsprint):\n%s", tc.pgdump, tc.pgrestore, d)
			}
			if !tc.same && want == plain {
				t.Errorf("the flag changes nothing in the source: the case proves nothing")
			}
			if tc.check != nil {
				tc.check(t, db)
			}
		})
	}

	// Selections a restore cannot take into an empty database (pg_dump -t
	// leaves out the table's schema): the archive's own schema must create
	// the tables pg_dump's does.
	for _, tc := range []struct {
		cmd    string
		args   []string
		pgdump []string
	}{
		{"dump", []string{"--table-and-children", "app.measurements"}, []string{"--table-and-children=app.measurements"}},
		{"dump", []string{"-n", "app", "--exclude-table-and-children", "app.measurements_2023"}, []string{"-n", "app", "--exclude-table-and-children=app.measurements_2023"}},
		{"dump", []string{"--table-and-children", "*.Measurements*", "--exclude-table-data-and-children", "app.measurements"}, []string{"--table-and-children=*.Measurements*"}},
		{"clone", []string{"--table-and-children", "app.measurements"}, []string{"--table-and-children=app.measurements"}},
	} {
		t.Run(tc.cmd+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			var got string
			if tc.cmd == "dump" {
				file := filepath.Join(tmp, "sel"+strconv.Itoa(n)+".pgs")
				n++
				mustPgsprint(t, append([]string{"dump", "-d", src, "-f", file, "-q"}, tc.args...)...)
				got = mustPgsprint(t, "restore", "-f", file, "--to-sql").stdout
				if strings.Contains(strings.Join(tc.args, " "), "data-and-children") {
					var l struct{ Tables []struct{ Rows int64 } }
					if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", file).stdout), &l); err != nil {
						t.Fatal(err)
					}
					if len(l.Tables) != 0 {
						t.Errorf("--exclude-table-data-and-children kept the data of %d tables", len(l.Tables))
					}
				}
			} else {
				db := fresh(t)
				mustPgsprint(t, append([]string{"clone", "--source", src, "--target", c.ConnString(db), "-q"}, tc.args...)...)
				got = schema(t, c.ConnString(db))
			}
			want := createdTables(schema(t, src, tc.pgdump...))
			if g := createdTables(got); strings.Join(g, "|") != strings.Join(want, "|") || len(want) == 0 {
				t.Errorf("tables %q, pg_dump creates %q", g, want)
			}
		})
	}

	t.Run("dump --snapshot", func(t *testing.T) {
		conn, err := pgx.Connect(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var id string
		if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, "src", "INSERT INTO public.snap VALUES (1), (2)"); err != nil {
			t.Fatal(err)
		}
		defer c.Exec(ctx, "src", "TRUNCATE public.snap")
		count := func(args ...string) int64 {
			file := filepath.Join(tmp, "snap.pgs")
			mustPgsprint(t, append([]string{"dump", "-d", src, "-f", file, "-q", "-t", "public.snap"}, args...)...)
			var l struct{ Tables []struct{ Rows int64 } }
			if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", file).stdout), &l); err != nil || len(l.Tables) != 1 {
				t.Fatalf("list: %v %+v", err, l)
			}
			return l.Tables[0].Rows
		}
		if got, now := count("--snapshot", id), count(); got != 0 || now != 2 {
			t.Errorf("rows in the exported snapshot %d (want 0), now %d (want 2)", got, now)
		}
	})

	// -b brings the large objects into a dump narrowed by -t, which
	// leaves them out by default, as pg_dump's.
	t.Run("dump -t -b", func(t *testing.T) {
		count := func(name string, args ...string) string {
			file := filepath.Join(tmp, name+".pgs")
			mustPgsprint(t, append([]string{"dump", "-d", src, "-f", file, "-q", "-t", "app.orders"}, args...)...)
			var l struct {
				Manifest struct {
					LargeObjects []json.RawMessage `json:"large_objects"`
				}
			}
			if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", file).stdout), &l); err != nil {
				t.Fatal(err)
			}
			return strconv.Itoa(len(l.Manifest.LargeObjects))
		}
		if with, without, want := count("lo-b", "-b"), count("lo"), query(t, "src", "SELECT count(*)::text FROM pg_largeobject_metadata"); with != want || without != "0" || want == "0" {
			t.Errorf("large objects of -t app.orders: %s with -b, %s without; the source has %s", with, without, want)
		}
	})

	t.Run("--strict-names", func(t *testing.T) {
		for _, args := range [][]string{
			{"dump", "-d", src, "-f", filepath.Join(tmp, "strict.pgs"), "-t", "app.orders", "-t", "app.nope"},
			{"restore", "-f", all, "-d", c.ConnString("postgres"), "-t", "app.orders", "-t", "app.nope"},
		} {
			if r := pgsprint(t, nil, append(args, "-q", "--strict-names")...); r.code != exitFailure || !strings.Contains(r.stderr, "nope") {
				t.Errorf("%s --strict-names: exit %d, %q; want 1 naming the pattern", args[0], r.code, r.stderr)
			}
		}
		if r := pgsprint(t, nil, "dump", "-d", src, "-f", filepath.Join(tmp, "lax.pgs"), "-t", "app.orders", "-t", "app.nope", "-q"); r.code != 0 {
			t.Errorf("without --strict-names: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("closed pipes", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			code int
			msg  string
		}{
			{[]string{"list", all}, exitClosedPipe, ""},
			{[]string{"restore", "-f", all, "--to-sql"}, exitClosedPipe, ""},
			// As pg_restore -l | head: quiet, not "write /dev/stdout: broken pipe".
			{[]string{"restore", "-f", all, "-l"}, exitClosedPipe, ""},
			{[]string{"verify", "-f", all}, exitClosedPipe, ""},
			// A dump that could not write its archive must never look finished.
			{[]string{"dump", "-d", src, "-f", "-", "-q"}, exitFailure, "broken pipe"},
		} {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close() // the reader is gone before the first write: head -1 done
			cmd := exec.Command(binary, tc.args...)
			cmd.Stdout = w
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err = cmd.Run()
			w.Close()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			switch {
			case code != tc.code:
				t.Errorf("%v into a closed pipe: exit %d, want %d (%s)", tc.args, code, tc.code, stderr.String())
			case tc.msg == "" && stderr.Len() > 0:
				t.Errorf("%v into a closed pipe said %q, want nothing", tc.args, stderr.String())
			case tc.msg != "" && (!strings.Contains(stderr.String(), tc.msg) || strings.Contains(stderr.String(), "lost the connection")):
				t.Errorf("%v into a closed pipe said %q, want %q", tc.args, stderr.String(), tc.msg)
			}
		}
	})

	t.Run("password asked on a terminal", func(t *testing.T) { testPasswordPrompt(t, c) })

	t.Run("compare -h -p -U", func(t *testing.T) {
		r := pgsprint(t, nil, "compare", "-h", c.SocketDir(), "-p", strconv.Itoa(c.Port()), "-U", pgtest.SuperuserName, "--source", "src", "--target", "src", "-j", "2")
		if r.code != 0 || !strings.Contains(r.stdout, "objects equal") {
			t.Errorf("compare -h: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("one data size and chunk count", func(t *testing.T) {
		read := func(path string) progress.Summary {
			var s progress.Summary
			b, err := os.ReadFile(path)
			if err == nil {
				err = json.Unmarshal(b, &s)
			}
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		dumped := read(filepath.Join(tmp, "dump.json"))
		mustPgsprint(t, "restore", "-f", all, "-d", c.ConnString(fresh(t)), "-j", "2", "-q", "--summary-json", filepath.Join(tmp, "restore.json"))
		restored := read(filepath.Join(tmp, "restore.json"))
		mustPgsprint(t, "clone", "--source", src, "--target", c.ConnString(fresh(t)), "-j", "2", "-q", "--summary-json", filepath.Join(tmp, "clone.json"))
		cloned := read(filepath.Join(tmp, "clone.json"))
		var l struct {
			DataRawBytes int64 `json:"data_raw_bytes"`
		}
		if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", all).stdout), &l); err != nil {
			t.Fatal(err)
		}
		verified := mustPgsprint(t, "verify", all).stdout
		if dumped.RawBytes == 0 || restored.RawBytes != dumped.RawBytes || l.DataRawBytes != dumped.RawBytes ||
			!strings.Contains(verified, " "+progress.Bytes(dumped.RawBytes)+" of data raw") {
			t.Errorf("raw data: dump %d, restore %d, list %d, verify %q", dumped.RawBytes, restored.RawBytes, l.DataRawBytes, verified)
		}
		if restored.Chunks != dumped.Chunks || cloned.Chunks != dumped.Chunks {
			t.Errorf("chunks: dump %d, restore %d, clone %d", dumped.Chunks, restored.Chunks, cloned.Chunks)
		}
		if cloned.Op != "clone" {
			t.Errorf("clone's summary says %q", cloned.Op)
		}
		// list: largest first.
		var sizes []int64
		var tl struct {
			Tables []struct {
				RawBytes int64 `json:"raw_bytes"`
			}
		}
		if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", all).stdout), &tl); err != nil {
			t.Fatal(err)
		}
		for _, tb := range tl.Tables {
			sizes = append(sizes, tb.RawBytes)
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] > sizes[j] })
		text := mustPgsprint(t, "list", all).stdout
		var shown []string
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) >= 6 && strings.HasPrefix(line, `"`) {
				shown = append(shown, f[len(f)-5]+" "+f[len(f)-4])
			}
		}
		if len(shown) < 3 || shown[0] != progress.Bytes(sizes[0]) || shown[1] != progress.Bytes(sizes[1]) {
			t.Errorf("list is not sorted by raw size: %v, sizes %v", shown[:min(3, len(shown))], sizes[:3])
		}
	})
}

// TestFilterFileMatchesPgDump17: --filter selects the tables pg_dump 17's
// own --filter selects from the same file, hostile names included, for
// dump, clone and restore.
func TestFilterFileMatchesPgDump17(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pg17(t)
	if err := c.CreateDB(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	tables := []string{`app.orders`, `app.order_items`, `app.log_2024`, `"App"."Orders"`, `public."Mixed Case"`,
		`public."a.b"`, `public."x$y"`, `public.t1`, `"we.ird"."t?"`, `"we.ird".tx`, "public.\"new\nline\"", `public."q""uote # x"`}
	ddl := `CREATE SCHEMA app; CREATE SCHEMA "App"; CREATE SCHEMA "we.ird";
		CREATE TABLE public.parent (id int, k int) PARTITION BY LIST (k);
		CREATE TABLE app.part1 PARTITION OF public.parent FOR VALUES IN (1);
		CREATE TABLE public.part2 PARTITION OF public.parent FOR VALUES IN (2) PARTITION BY LIST (id);
		CREATE TABLE "we.ird"."part2 a" PARTITION OF public.part2 FOR VALUES IN (7);`
	for _, tb := range tables {
		ddl += "CREATE TABLE " + tb + " (id int); INSERT INTO " + tb + " VALUES (1);"
	}
	if err := c.Exec(ctx, "f", ddl); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := c.ConnString("f")
	all := filepath.Join(dir, "all.pgs")
	mustPgsprint(t, "dump", "-d", src, "-f", all, "-q")
	n := 0
	for _, tc := range []struct {
		name, file string
		live       bool // table_and_children: dump and clone only
	}{
		{"tables", "include table app.order*\ninclude table \"App\".\"Orders\"\nexclude table app.order_items\n", false},
		{"schemas", "# comment\ninclude schema \"we.ird\"\n  INCLUDE SCHEMA app   # trailing comment\nexclude table app.log_2024\n", false},
		{"excludes and data", "exclude schema app\nexclude table_data public.t1\nexclude table \"a.b\"\nexclude table public.\"x$y\"\n", false},
		{"quotes over lines", "include table public.\"new\nline\"\ninclude table public.\"q\"\"uote # x\"\ninclude table public.\"Mixed Case\"\n", false},
		{"table_and_children", "include table_and_children public.parent\n", true},
		{"exclude table_and_children", "exclude table_and_children public.part2\nexclude schema \"App\"\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(dir, "filter"+strconv.Itoa(n)+".txt")
			n++
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			want := createdTables(pgtest.SchemaDump(t, c.BinDir(), src, "--filter="+file))
			if len(want) == 0 {
				t.Fatal("pg_dump selects nothing: the case proves little")
			}
			check := func(what, script string) {
				t.Helper()
				if got := createdTables(script); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("%s: tables %q, pg_dump 17 --filter creates %q", what, got, want)
				}
			}
			archive := filepath.Join(dir, "sel"+strconv.Itoa(n)+".pgs")
			mustPgsprint(t, "dump", "-d", src, "-f", archive, "-q", "--filter", file)
			check("dump", mustPgsprint(t, "restore", "-f", archive, "--to-sql").stdout)
			db := "clone" + strconv.Itoa(n)
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			mustPgsprint(t, "clone", "--source", src, "--target", c.ConnString(db), "-q", "--filter", file)
			check("clone", pgtest.SchemaDump(t, c.BinDir(), c.ConnString(db)))
			if !tc.live {
				check("restore", mustPgsprint(t, "restore", "-f", all, "--to-sql", "--filter", file).stdout)
			} else if r := pgsprint(t, nil, "restore", "-f", all, "--to-sql", "--filter", file); r.code != exitUsage || !strings.Contains(r.stderr, file+" line 1") {
				t.Errorf("restore of table_and_children: exit %d, %q; want 2 naming the file and line", r.code, r.stderr)
			}
		})
	}
	t.Run("errors name the file and line", func(t *testing.T) {
		file := filepath.Join(dir, "bad.txt")
		if err := os.WriteFile(file, []byte("include table t1\n\ninclude foreign_data srv\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "dump", "-d", src, "-f", filepath.Join(dir, "bad.pgs"), "--filter", file)
		if r.code != exitUsage || !strings.Contains(r.stderr, file+" line 3: include foreign_data is not supported") {
			t.Errorf("exit %d, %q", r.code, r.stderr)
		}
	})
}

// TestPgFlagsRefused: pg_dump/pg_restore flags that mean nothing, or
// something else, for pgsprint stop with exit 2 and the reason, never
// "unknown flag"; -h is never help.
func TestPgFlagsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dump", "-d", "x", "-F", "c"}, "pgsprint dump writes one format, its own archive"},
		{[]string{"dump", "-d", "x", "-E", "LATIN1"}, "source database's encoding"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--encoding=UTF8"}, "source database's encoding"},
		{[]string{"dump", "-d", "x", "--no-tablespaces"}, "use pgsprint restore --no-tablespaces"},
		{[]string{"dump", "-d", "x", "--no-table-access-method"}, "use pgsprint restore --no-table-access-method"},
		{[]string{"dump", "-d", "x", "--load-via-partition-root"}, "loads each partition's rows into that partition"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--no-toast-compression"}, "pgsprint dump --no-toast-compression"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "-1"}, "-1/--single-transaction is not supported by pgsprint restore"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--if-exists"}, "--if-exists requires --clean"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--section", "post-data"}, "--section post-data is not supported by pgsprint restore"},
		{[]string{"dump", "-d", "x", "--section", "post-data"}, "--section post-data is not supported by pgsprint dump"},
		{[]string{"dump", "-d", "x", "--section", "nope"}, `unrecognized section name: "nope"`},
		{[]string{"clone", "--source", "x", "--target", "y", "--section", "data", "--data-only"}, "--section cannot be used with"},
		{[]string{"list", "-h"}, "-h is not help: use pgsprint list --help"},
		{[]string{"verify", "-h", "x"}, "-h is not help"},
		{[]string{"dump", "-d", "x", "--filter", "/nonexistent/filter"}, "--filter /nonexistent/filter: no such file or directory"},
		{[]string{"dump", "-d", "x", "-f", "-", "-W", "-w"}, "-W (ask for a password) and -w (never ask) cannot be used together"},
		{[]string{"dump", "-d", "x", "--statistics", "--no-statistics"}, "--statistics and --no-statistics cannot be used together"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--statistics", "--no-statistics"}, "--statistics and --no-statistics cannot be used together"},
		// PostgreSQL 18's: pg_dump's and pg_restore's own conflicts, and
		// the flags pgsprint does not take.
		{[]string{"dump", "-d", "x", "--no-data", "-a"}, "options -a/--data-only and --no-data cannot be used together"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--no-schema", "-s"}, "options -s/--schema-only and --no-schema cannot be used together"},
		{[]string{"clone", "--source", "x", "--target", "y", "--statistics-only", "--no-statistics"}, "options --statistics-only and --no-statistics cannot be used together"},
		{[]string{"restore", "-f", "x.pgs", "--to-sql", "--statistics-only"}, "--statistics-only does not combine with --to-sql"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--transaction-size", "0"}, "--transaction-size must be in range 1..2147483647"},
		{[]string{"dump", "-d", "x", "--with-statistics"}, "PostgreSQL 18's betas had it"},
		{[]string{"restore", "-f", "x.pgs", "-d", "x", "--restrict-key", "k"}, "--restrict-key is not supported by pgsprint restore"},
		{[]string{"dump", "-d", "x", "--use-set-session-authorization"}, "use pgsprint restore --use-set-session-authorization"},
		{[]string{"dump", "--all", "-g"}, "use pg_dumpall --globals-only"},
		{[]string{"dump", "-d", "x", "--no-role-passwords"}, "--no-role-passwords applies to --all only"},
	} {
		r := pgsprint(t, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want 2 and one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	// -W with no terminal: no controlling terminal (a new session), as
	// under cron or CI; it must not hang or read the password from stdin.
	cmd := exec.Command(binary, "dump", "-d", "x", "-W", "-f", filepath.Join(t.TempDir(), "x.pgs"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdin = strings.NewReader("secret\n")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || !strings.Contains(string(out), "-W: cannot ask for a password: there is no terminal") {
		t.Errorf("-W without a terminal: %v, %q", err, out)
	}
}

// testPasswordPrompt dumps over TCP, where the server wants a password
// and none is given, in a tmux pane (a terminal): pgsprint asks, as
// pg_dump does, and the password typed reaches its connections and
// pg_dump's. With -w it fails at once, exit 3, without asking.
func testPasswordPrompt(t *testing.T, c *pgtest.Instance) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	dir := t.TempDir()
	tcp := c.TCPConnString("src", pgtest.SuperuserName)
	file := filepath.Join(dir, "t.pgs")
	if r := pgsprint(t, []string{"PGPASSFILE=/nonexistent"}, "dump", "-w", "-d", tcp, "-f", file, "-t", "app.orders", "-q"); r.code != exitConnection {
		t.Errorf("-w with no password: exit %d, %q; want 3", r.code, r.stderr)
	}
	session := "pgsprint-pw-" + filepath.Base(dir)
	script := filepath.Join(dir, "run.sh")
	done := filepath.Join(dir, "done")
	body := "#!/bin/sh\nunset PGPASSWORD; export PGPASSFILE=/nonexistent\n" + shellQuote(binary) + " dump -d " + shellQuote(tcp) +
		" -f " + shellQuote(file) + " -t app.orders -q; echo $? > " + shellQuote(done) + "; sleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "20", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	screen := func() string {
		out, err := exec.Command("tmux", "capture-pane", "-p", "-t", session).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("(capture-pane: %v: %s)", err, out)
		}
		return string(out)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(screen(), "Password for user "+pgtest.SuperuserName+":") { // capture-pane drops trailing spaces
		if time.Now().After(deadline) {
			t.Fatalf("no password prompt; screen:\n%s", screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := exec.Command("tmux", "send-keys", "-t", session, pgtest.SuperuserPassword, "Enter").CombinedOutput(); err != nil {
		t.Fatalf("tmux send-keys: %v %s", err, out)
	}
	for {
		if b, err := os.ReadFile(done); err == nil && strings.TrimSpace(string(b)) != "" {
			if code := strings.TrimSpace(string(b)); code != "0" {
				t.Fatalf("dump after the prompt: exit %s; screen:\n%s", code, screen())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dump did not finish; screen:\n%s", screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := screen(); strings.Contains(s, pgtest.SuperuserPassword) {
		t.Errorf("the password was echoed:\n%s", s)
	}
	mustPgsprint(t, "verify", file)
}
