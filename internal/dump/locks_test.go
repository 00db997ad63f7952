package dump

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/compare"
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
// must a dump with -j 2 (whose leader holds no table lock, pg_dump
// --schema-only one per table, each reader one); the archive restores
// (table count, and the rows of every 10th table, compared), and
// compare's hashes of every table and dumps of both schemas fit in the
// same lock slots and find them equal.
func TestManyTablesFewLockSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t, pgtest.Options{Settings: pgtest.SmallLockTable(64)})
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
	_, err := Run(pgtest.Context(t), dumpOptions(t, c.ConnString("many"), file, 2, "zstd:1"))
	most := stop()
	t.Logf("dump in %v; most locks held by one backend: pgsprint %d, pg_dump %d", time.Since(began), most["pgsprint"], most["pg_dump"])
	if err != nil {
		t.Fatalf("dump of %d tables: %v", manyTables, err)
	}
	if most["pgsprint"] > 100 {
		t.Errorf("a pgsprint backend held %d locks at once: the leader or a reader keeps table locks", most["pgsprint"])
	}
	restoreFile(t, file, c.ConnString("back"), 2)
	sample := `SELECT count(*) || ':' || sum(s) FROM (SELECT (xpath('/row/s/text()',
		query_to_xml(format('SELECT coalesce(sum(id * 7 + v), 0) + count(*) s FROM public.%I', c.relname), false, true, '')))[1]::text::bigint s
		FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace AND c.relname ~ '^t[0-9]+$' AND substr(c.relname, 2)::int % 10 = 0) x`
	if a, b := pgtest.Scalar(t, c.ConnString("many"), sample), pgtest.Scalar(t, c.ConnString("back"), sample); a != b {
		t.Errorf("sampled tables differ: source %s, restored %s", a, b)
	}
	count := `SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace`
	if got := pgtest.Scalar(t, c.ConnString("back"), count); got != strconv.Itoa(manyTables) {
		t.Errorf("restored %s tables, want %d", got, manyTables)
	}
	// What `pgsprint compare --schema` does: hash every table of both
	// databases on this server at once, and dump both schemas one after
	// the other, within the same lock slots.
	fa, err := compare.FingerprintParallel(ctx, mustConfig(t, c.ConnString("many")), runtime.NumCPU())
	if err != nil {
		t.Fatalf("hash the source: %v", err)
	}
	fb, err := compare.FingerprintParallel(ctx, mustConfig(t, c.ConnString("back")), runtime.NumCPU())
	if err != nil {
		t.Fatalf("hash the restored copy: %v", err)
	}
	equal, entries := 0, compare.Compare(fa, fb)
	for _, e := range entries {
		if e.Equal() {
			equal++
		}
	}
	if equal != manyTables || len(entries) != manyTables {
		t.Errorf("compare: %d of %d objects equal, want %d of %d", equal, len(entries), manyTables, manyTables)
	}
	sa, err := compare.SchemaDump(ctx, c.BinDir(), c.ConnString("many"))
	if err != nil {
		t.Fatalf("schema of the source: %v", err)
	}
	sb, err := compare.SchemaDump(ctx, c.BinDir(), c.ConnString("back"))
	if err != nil {
		t.Fatalf("schema of the restored copy: %v", err)
	}
	if d := compare.SchemaDiff(sa, sb); d != "" {
		t.Errorf("schemas differ:\n%s", d)
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

// TestTableChangedAfterSnapshot: no one holds a table's lock between the
// snapshot and its COPY, so another session may change it meanwhile. A
// change that leaves the snapshot's rows unreadable (TRUNCATE and table
// rewrites are not MVCC-safe: the table would read as empty, without an
// error) or puts another table under the name must stop the dump with one
// line naming the table and what happened; never succeed with the wrong
// rows. A change that is MVCC-safe (ADD COLUMN without a rewrite) must
// not. Made deterministic with -j 1 and the archive on a pipe that is not
// read: the one reader copies the big table first (largest first) and
// stops on the full pipe in the middle of it; the statement then commits
// (after pg_dump, whose lock it waits for if pg_dump still runs), and
// only then is the pipe read, and the reader goes on to the victim.
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
			// The archive on a pipe not read until the statement has
			// committed, as `pgsprint dump -f - -j 1 -Z none | ...`.
			pr, pw := io.Pipe()
			opts := dumpOptions(t, c.ConnString("chg"), "-", 1, "none")
			opts.Stdout = pw
			rctx, cancel := context.WithCancel(pgtest.Context(t))
			defer cancel()
			ran := make(chan error, 1)
			go func() {
				_, err := Run(rctx, opts)
				pw.CloseWithError(err)
				ran <- err
			}()
			t.Cleanup(func() { cancel(); pr.Close() })
			copyBig := pgtest.WaitForCopy(t, admin, `COPY "public"."big"%`)
			// A statement that came before pg_dump's locks would fail
			// pg_dump instead (as it fails pg_dump -Fc).
			pgDumpEnded()
			ddl, err := pgx.Connect(ctx, c.ConnString("chg"))
			if err != nil {
				t.Fatal(err)
			}
			defer ddl.Close(ctx)
			dctx, dcancel := context.WithTimeout(ctx, 30*time.Second)
			defer dcancel()
			if _, err := ddl.Exec(dctx, tc.sql); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if still := pgtest.Scalar(t, c.ConnString("postgres"), fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity WHERE pid = %d AND state = 'active' AND query LIKE 'COPY "public"."big"%%'`, copyBig)); still != "1" {
				t.Fatal("the dump got past the big table before the statement: the test would prove nothing")
			}
			file := filepath.Join(t.TempDir(), fmt.Sprintf("chg%d.pgs", i))
			f, err := os.Create(file)
			if err != nil {
				t.Fatal(err)
			}
			// The dump's error, if any, ends the copy too: what it wrote
			// before is kept, to be checked below.
			io.Copy(f, pr)
			f.Close()
			var runErr error
			select {
			case runErr = <-ran:
			case <-time.After(time.Minute):
				t.Fatal("the dump did not end within a minute")
			}
			pgtest.NoSessionsLeft(t, admin)
			if tc.want == "" {
				if runErr != nil {
					t.Fatalf("the dump failed after an MVCC-safe %s: %v", tc.name, runErr)
				}
				target := fmt.Sprintf("chg%d", i)
				if err := c.CreateDB(ctx, target); err != nil {
					t.Fatal(err)
				}
				restoreFile(t, file, c.ConnString(target), 1)
				if got := pgtest.Scalar(t, c.ConnString(target), `SELECT count(*) FROM public.victim`); got != "5000" {
					t.Errorf("victim holds %s rows, want the snapshot's 5000", got)
				}
				return
			}
			pgtest.RequireOneLineError(t, runErr, `table "public"."victim" was `+tc.want)
			if complete(t, file) {
				t.Errorf("what the failed dump wrote verifies as a complete archive")
			}
		})
	}
}

// complete reports whether the archive at file opens and every stream of
// it checks, as `pgsprint verify` does.
func complete(t *testing.T, file string) bool {
	t.Helper()
	ar, err := archivetest.OpenFile(t, file)
	if err != nil {
		return false
	}
	return archive.Check(context.Background(), ar, 1) == nil
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
