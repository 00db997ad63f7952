package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// manyTables is how many tables TestManyTablesFewLockSlots dumps: on its
// server (max_locks_per_transaction = 64, max_connections = 10: a shared
// lock table of about 1,500 entries), pg_dump -Fc, which holds one lock
// per table, succeeds up to about 1,500 tables, and a dump whose leader
// held one lock per table beside pg_dump's failed from about 800 (it did
// on this count: "out of shared memory").
const manyTables = 1100

// TestManyTablesFewLockSlots: a dump needs no more lock slots than pg_dump
// -Fc. On a server whose lock table holds pg_dump's locks but not twice
// as many, pg_dump -Fc succeeds (so the server permits a dump), and so
// must pgsprint dump -j 2 (whose leader holds no table lock, pg_dump
// --schema-only one per table, each reader one); the archive restores
// (table count, and the rows of every 10th table, compared).
func TestManyTablesFewLockSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t, pgtest.Options{Settings: smallLockTable(64)})
	for _, db := range []string{"many", "back"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	// 100 tables per transaction: creating a table locks it too.
	for i := 0; i < manyTables; i += 100 {
		if err := c.Exec(ctx, "many", fmt.Sprintf(`DO $$ BEGIN FOR i IN %d..%d LOOP
			EXECUTE format('CREATE TABLE public.t%%1$s (id int, v int); INSERT INTO public.t%%1$s SELECT g, g * %%1$s FROM generate_series(1, %%2$s) g', i, i %% 3);
		END LOOP; END $$`, i, min(i+100, manyTables)-1)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d tables created in %v", manyTables, time.Since(began))
	dir := t.TempDir()
	pgDump := exec.Command(filepath.Join(c.BinDir(), "pg_dump"), "-Fc", "-f", filepath.Join(dir, "pg_dump.dump"), c.ConnString("many"))
	if out, err := pgDump.CombinedOutput(); err != nil {
		t.Fatalf("pg_dump -Fc fails on this server, so the test proves nothing: %v\n%s", err, out)
	}
	stop := watchLocks(t, c.ConnString("postgres"))
	file := filepath.Join(dir, "many.pgs")
	began = time.Now()
	r := pgsprint(t, nil, "dump", "-q", "-d", c.ConnString("many"), "-f", file, "-j", "2")
	most := stop()
	t.Logf("dump in %v; most locks held by one backend: pgsprint %d, pg_dump %d", time.Since(began), most["pgsprint"], most["pg_dump"])
	if r.code != 0 {
		t.Fatalf("dump of %d tables: exit %d\n%s", manyTables, r.code, r.stderr)
	}
	if most["pgsprint"] > 100 {
		t.Errorf("a pgsprint backend held %d locks at once: the leader or a reader keeps table locks", most["pgsprint"])
	}
	mustPgsprint(t, "restore", "-q", "-f", file, "-d", c.ConnString("back"), "-j", "2")
	sample := `SELECT count(*) || ':' || sum(s) FROM (SELECT (xpath('/row/s/text()',
		query_to_xml(format('SELECT coalesce(sum(id * 7 + v), 0) + count(*) s FROM public.%I', c.relname), false, true, '')))[1]::text::bigint s
		FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace AND c.relname ~ '^t[0-9]+$' AND substr(c.relname, 2)::int % 10 = 0) x`
	if a, b := scalar(t, c.ConnString("many"), sample), scalar(t, c.ConnString("back"), sample); a != b {
		t.Errorf("sampled tables differ: source %s, restored %s", a, b)
	}
	count := `SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace`
	if got := scalar(t, c.ConnString("back"), count); got != strconv.Itoa(manyTables) {
		t.Errorf("restored %s tables, want %d", got, manyTables)
	}
	// compare hashes every table of both databases on this server, and
	// dumps both schemas: within the same lock slots.
	r = pgsprint(t, nil, "compare", "--schema", "--source", c.ConnString("many"), "--target", c.ConnString("back"))
	if want := fmt.Sprintf("%d of %d objects equal", manyTables, manyTables); r.code != 0 || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "schema: equal") {
		t.Errorf("compare: exit %d, want %q and equal schemas:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}

// watchLocks polls pg_locks until the returned function is called, which
// returns the most locks one backend held at once, by application_name
// ("pgsprint", "pg_dump").
func watchLocks(t *testing.T, connString string) (stop func() map[string]int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), connString)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	most := map[string]int{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer conn.Close(context.Background())
		for {
			rows, err := conn.Query(context.Background(), `SELECT application_name, max(n)::int FROM (SELECT a.application_name, count(*) n
				FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a USING (pid)
				WHERE a.application_name IN ('pgsprint', 'pg_dump') GROUP BY 1, pid) s GROUP BY 1`)
			if err == nil {
				for rows.Next() {
					var app string
					var n int
					if rows.Scan(&app, &n) == nil {
						most[app] = max(most[app], n)
					}
				}
				rows.Close()
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() map[string]int {
		close(done)
		wg.Wait()
		return most
	}
}

// ddlKinds are the statements that take ACCESS EXCLUSIVE on a table: each
// queues behind the dump's leader, and a reader's COPY of that table
// would queue behind it.
var ddlKinds = []struct{ name, sql string }{
	{"alter", `ALTER TABLE public.victim ADD COLUMN z int`},
	{"truncate", `TRUNCATE public.victim`},
	{"drop", `DROP TABLE public.victim`},
	{"lock", `BEGIN; LOCK TABLE public.victim IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(0.3); COMMIT`},
}

// TestDDLNeverHangs runs ALTER, TRUNCATE, DROP and LOCK ... ACCESS
// EXCLUSIVE on a table from another session at random moments of a dump
// or a clone (right at the start, or while the readers copy the chunks of
// a bigger table, before they reach this one). pgsprint must end within
// seconds: either it succeeds (the statement came before the snapshot, or
// changed nothing the snapshot's rows need, or came after the table was
// read), and the copy is right; or it fails, exit 1, with one line naming
// the table and either the statement's session (a lock conflict) or what
// happened to the table since the snapshot (truncated, dropped...).
// Either way the statement completes, no pgsprint session (or lock) is
// left and a failed dump leaves no file. `make test` runs each statement
// once under dump and once under clone (8 iterations), `make test-long`
// 24; PGSPRINT_DDL_ITERATIONS runs more; the log's seed replays a run
// (PGSPRINT_RESUME_SEED).
func TestDDLNeverHangs(t *testing.T) {
	t.Parallel()
	// The victim is above the dump's small-table size (1 MiB), so that it
	// is read on its own, in chunks, over a window the statement can hit:
	// batched with the small tables, 8 runs could all miss it.
	const victimRows = 100000
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "ddl"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "ddl", `CREATE TABLE public.big (id int PRIMARY KEY, pad text);
		INSERT INTO public.big SELECT g, md5(g::text) FROM generate_series(1, 100000) g;
		CREATE TABLE public.small (id int PRIMARY KEY); INSERT INTO public.small SELECT generate_series(1, 100);`); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	n, rng := killLoop(t, "PGSPRINT_DDL_ITERATIONS", repeat(2*len(ddlKinds), 24))
	conflicts, changed, successes := 0, 0, 0
	for i := range n {
		kind := ddlKinds[i%len(ddlKinds)]
		op := []string{"dump", "clone"}[(i/len(ddlKinds))%2]
		atStart := rng.IntN(3) == 0
		delay := time.Duration(rng.IntN(200)) * time.Millisecond
		if atStart {
			delay = time.Duration(rng.IntN(40)) * time.Millisecond
		}
		t.Run(fmt.Sprintf("%d %s %s", i, op, kind.name), func(t *testing.T) {
			if err := c.Exec(ctx, "ddl", fmt.Sprintf(`DROP TABLE IF EXISTS public.victim;
				CREATE TABLE public.victim AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, %d) g`, victimRows)); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			target := fmt.Sprintf("copy%d", i)
			args := []string{"dump", "-d", c.ConnString("ddl"), "-f", filepath.Join(dir, "a.pgs"), "-j", "2", "--chunk-size", "1MB"}
			if op == "clone" {
				if err := c.CreateDB(ctx, target); err != nil {
					t.Fatal(err)
				}
				args = []string{"clone", "--source", c.ConnString("ddl"), "--target", c.ConnString(target), "-j", "2", "--chunk-size", "1MB"}
			}
			ddl, err := pgx.Connect(ctx, c.ConnString("ddl"))
			if err != nil {
				t.Fatal(err)
			}
			defer ddl.Close(ctx)
			began := time.Now()
			cmd, stderr := startPgsprint(t, args...)
			if atStart {
				time.Sleep(delay)
			} else {
				waitForCopy(t, admin, "COPY%")
				time.Sleep(delay)
			}
			t.Logf("%s after %v (at start: %v)", kind.name, time.Since(began).Round(time.Millisecond), atStart)
			ddlDone := make(chan error, 1)
			go func() {
				_, err := ddl.Exec(ctx, kind.sql)
				ddlDone <- err
			}()
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("%s hung behind %s: still running after 20 s", op, kind.name)
			}
			code := cmd.ProcessState.ExitCode()
			t.Logf("%s exit %d after %v", op, code, time.Since(began).Round(time.Millisecond))
			select {
			case err := <-ddlDone:
				if err != nil {
					t.Errorf("%s: %v", kind.name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not complete within 10 s of the %s's end", kind.name, op)
			}
			noSessionsLeft(t, admin)
			if code != 0 {
				// pg_dump names it public.victim, pgsprint "public"."victim".
				checkOneError(t, code, 1, stderr.String(), `victim"`)
				switch {
				case strings.Contains(stderr.String(), "session pid"):
					conflicts++
					if want := fmt.Sprintf("pid %d ", ddl.PgConn().PID()); !strings.Contains(stderr.String(), want) {
						t.Errorf("the message does not name the blocking session (%s):\n%s", want, stderr)
					}
				case strings.Contains(stderr.String(), "by another session after the snapshot was taken"):
					changed++
				}
				if op == "dump" {
					noPartialFiles(t, dir)
				}
				return
			}
			// Success: the statement came before the snapshot, or changed
			// nothing its rows need, or came after the table was read.
			successes++
			copied := c.ConnString(target)
			if op == "dump" {
				if err := c.CreateDB(ctx, target); err != nil {
					t.Fatal(err)
				}
				mustPgsprint(t, "restore", "-q", "-f", filepath.Join(dir, "a.pgs"), "-d", copied, "-j", "2")
			}
			for _, table := range []string{"public.big", "public.small"} {
				hash := `SELECT count(*) || ':' || sum(hashtext(t::text)) FROM ` + table + ` t`
				if a, b := scalar(t, c.ConnString("ddl"), hash), scalar(t, copied, hash); a != b {
					t.Errorf("%s: source %s, copy %s", table, a, b)
				}
			}
			if kind.name != "drop" || scalar(t, copied, `to_regclass('public.victim') IS NOT NULL`) == "true" {
				if got := scalar(t, copied, `SELECT count(*) FROM public.victim`); got != fmt.Sprint(victimRows) && !(kind.name == "truncate" && got == "0") {
					t.Errorf("victim holds %s rows after a %s", got, kind.name)
				}
			}
		})
	}
	t.Logf("%d of %d runs stopped at once on a lock conflict, %d on a table changed since the snapshot, %d succeeded", conflicts, n, changed, successes)
	if conflicts+changed == 0 {
		t.Error("no run met the statement: the test proves nothing")
	}
}

// TestCloneIntoItself: a clone whose target is its source would wait for
// its own locks forever; it is refused before anything is read or written,
// however the two are named (a socket and TCP, here).
func TestCloneIntoItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "selfc"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "selfc", `CREATE TABLE public.t AS SELECT generate_series(1, 10) id`); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{c.ConnString("selfc"), c.TCPConnString("selfc", "postgres")} {
		r := pgsprint(t, []string{"PGPASSWORD=" + pgtest.SuperuserPassword}, "clone", "--source", c.ConnString("selfc"), "--target", target, "--clean")
		checkOneError(t, r.code, 2, r.stderr, "--source and --target are the same database")
	}
	if got := scalar(t, c.ConnString("selfc"), `SELECT count(*) FROM public.t`); got != "10" {
		t.Errorf("the source holds %s rows, want 10", got)
	}
	// Another database of the same server is not the same database.
	if err := c.CreateDB(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	mustPgsprint(t, "clone", "-q", "--source", c.ConnString("selfc"), "--target", c.ConnString("other"))
}

// TestTableChangedAfterSnapshot: no one holds a table's lock between the
// snapshot and its COPY, so another session may change it meanwhile. A
// change that leaves the snapshot's rows unreadable (TRUNCATE and table
// rewrites are not MVCC-safe: the table would read as empty, without an
// error) or puts another table under the name must stop the dump, exit 1,
// with one line naming the table and what happened; never exit 0 with the
// wrong rows. A change that is MVCC-safe (ADD COLUMN without a rewrite)
// must not. Made deterministic with -j 1 and the archive on a pipe that is
// not read: the one reader copies the big table first (largest first)
// and stops on the full pipe in the middle of it; the statement then
// commits (after pg_dump, whose lock it waits for if pg_dump still runs),
// and only then is the pipe read, and the reader goes on to the victim.
func TestTableChangedAfterSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "chg"); err != nil {
		t.Fatal(err)
	}
	// 12 MB of COPY text, far more than a pipe, pgsprint's blocks and the
	// socket buffers hold.
	if err := c.Exec(ctx, "chg", `CREATE TABLE public.big (id int, pad text);
		INSERT INTO public.big SELECT g, md5(g::text) FROM generate_series(1, 300000) g`); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for i, tc := range []struct{ name, sql, want string }{
		{"truncate", `TRUNCATE public.victim`, "truncated or rewritten"},
		{"vacuum full", `VACUUM FULL public.victim`, "truncated or rewritten"},
		{"alter type", `ALTER TABLE public.victim ALTER COLUMN id TYPE bigint`, "truncated or rewritten"},
		{"drop", `DROP TABLE public.victim`, "dropped or renamed"},
		{"drop and create", `BEGIN; DROP TABLE public.victim; CREATE TABLE public.victim (id int, v text); COMMIT`, "dropped and created again"},
		{"rename", `BEGIN; ALTER TABLE public.victim RENAME TO old; CREATE TABLE public.victim (id int, v text); COMMIT`, "renamed"},
		{"add column", `ALTER TABLE public.victim ADD COLUMN z int`, ""}, // MVCC-safe: the dump succeeds
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Exec(ctx, "chg", `DROP TABLE IF EXISTS public.victim, public.old;
				CREATE TABLE public.victim AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 5000) g`); err != nil {
				t.Fatal(err)
			}
			pgDumpEnded := watchPgDump(t, c.ConnString("postgres"))
			cmd := exec.Command(binary, "dump", "-q", "-d", c.ConnString("chg"), "-f", "-", "-j", "1", "-Z", "none")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			copyBig := waitForCopy(t, admin, `COPY "public"."big"%`)
			// A statement that came before pg_dump's locks would fail
			// pg_dump instead (as it fails pg_dump -Fc).
			pgDumpEnded()
			ddl, err := pgx.Connect(ctx, c.ConnString("chg"))
			if err != nil {
				t.Fatal(err)
			}
			defer ddl.Close(ctx)
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if _, err := ddl.Exec(dctx, tc.sql); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if still := scalar(t, c.ConnString("postgres"), fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND state = 'active' AND query LIKE 'COPY "public"."big"%%'`, copyBig)); still != "1" {
				t.Fatal("the dump got past the big table before the statement: the test would prove nothing")
			}
			archive := filepath.Join(t.TempDir(), fmt.Sprintf("chg%d.pgs", i))
			f, err := os.Create(archive)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, out); err != nil {
				t.Fatal(err)
			}
			f.Close()
			code := waitExit(t, cmd)
			noSessionsLeft(t, admin)
			if tc.want == "" {
				if code != 0 {
					t.Fatalf("exit %d after an MVCC-safe %s:\n%s", code, tc.name, stderr.String())
				}
				target := fmt.Sprintf("chg%d", i)
				if err := c.CreateDB(ctx, target); err != nil {
					t.Fatal(err)
				}
				mustPgsprint(t, "restore", "-q", "-f", archive, "-d", c.ConnString(target))
				if got := scalar(t, c.ConnString(target), `SELECT count(*) FROM public.victim`); got != "5000" {
					t.Errorf("victim holds %s rows, want the snapshot's 5000", got)
				}
				return
			}
			checkOneError(t, code, 1, stderr.String(), `table "public"."victim" was `+tc.want)
			if r := pgsprint(t, nil, "verify", archive); r.code == 0 {
				t.Errorf("what the failed dump wrote verifies as a complete archive")
			}
		})
	}
}

// watchPgDump polls pg_stat_activity from now on; the returned function
// waits until a pg_dump session has been seen and has ended.
func watchPgDump(t *testing.T, connString string) (wait func()) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), connString)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	quit := make(chan struct{})
	go func() {
		defer conn.Close(context.Background())
		seen := false
		for {
			var n int
			if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = 'pg_dump'`).Scan(&n); err != nil {
				return
			}
			if seen && n == 0 {
				close(ended)
				return
			}
			seen = seen || n > 0
			select {
			case <-quit:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() {
		t.Helper()
		defer close(quit)
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatal("no pg_dump session seen ending within 30 s")
		}
	}
}
