package clone

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

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
// (dump.Run) or a clone (Run), right at the start, or while the readers
// copy the chunks of a bigger table, before they reach this one. The run
// must end within seconds: either it succeeds (the statement came before
// the snapshot, or changed nothing the snapshot's rows need, or came
// after the table was read), and the copy is right; or it fails with one
// line naming the table and either the statement's session (a lock
// conflict) or what happened to the table since the snapshot (truncated,
// dropped...). Either way the statement completes, no pgsprint session
// (or lock) is left and a failed dump leaves no file. `make test` runs
// each statement once under dump and once under clone (8 iterations),
// `make test-long` 24; PGSPRINT_DDL_ITERATIONS runs more; the log's seed
// replays a run (PGSPRINT_RESUME_SEED).
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
	n, rng := pgtest.Seeded(t, "PGSPRINT_DDL_ITERATIONS", pgtest.Repeat(2*len(ddlKinds), 24))
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
			// dump -j 2 --chunk-size 1MB, or clone -j 2 --chunk-size 1MB.
			run := func(ctx context.Context) error {
				_, err := dump.Run(ctx, dumpOptions(t, c.ConnString("ddl"), filepath.Join(dir, "a.pgs"), 2, "zstd:1", 1<<20))
				return err
			}
			if op == "clone" {
				if err := c.CreateDB(ctx, target); err != nil {
					t.Fatal(err)
				}
				opts := cloneOptions(t, c.ConnString("ddl"), c.ConnString(target), 2, 1<<20)
				run = func(ctx context.Context) error { _, err := Run(ctx, opts); return err }
			}
			ddl, err := pgx.Connect(ctx, c.ConnString("ddl"))
			if err != nil {
				t.Fatal(err)
			}
			defer ddl.Close(ctx)
			began := time.Now()
			rctx, cancel := context.WithCancel(pgtest.Context(t))
			defer cancel()
			ran := make(chan error, 1)
			go func() { ran <- run(rctx) }()
			if atStart {
				time.Sleep(delay)
			} else {
				pgtest.WaitForCopy(t, admin, "COPY%")
				time.Sleep(delay)
			}
			t.Logf("%s after %v (at start: %v)", kind.name, time.Since(began).Round(time.Millisecond), atStart)
			ddlDone := make(chan error, 1)
			go func() {
				_, err := ddl.Exec(ctx, kind.sql)
				ddlDone <- err
			}()
			var runErr error
			select {
			case runErr = <-ran:
			case <-time.After(20 * time.Second):
				cancel()
				<-ran
				t.Fatalf("%s hung behind %s: still running after 20 s", op, kind.name)
			}
			t.Logf("%s ended after %v: %v", op, time.Since(began).Round(time.Millisecond), runErr)
			select {
			case err := <-ddlDone:
				if err != nil {
					t.Errorf("%s: %v", kind.name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not complete within 10 s of the %s's end", kind.name, op)
			}
			pgtest.NoSessionsLeft(t, admin)
			if runErr != nil {
				// pg_dump names it public.victim, pgsprint "public"."victim".
				pgtest.RequireOneLineError(t, runErr, `victim"`)
				switch msg := runErr.Error(); {
				case strings.Contains(msg, "session pid"):
					conflicts++
					if want := fmt.Sprintf("pid %d ", ddl.PgConn().PID()); !strings.Contains(msg, want) {
						t.Errorf("the message does not name the blocking session (%s): %s", want, msg)
					}
				case strings.Contains(msg, "by another session after the snapshot was taken"):
					changed++
				}
				if op == "dump" {
					pgtest.NoPartialFiles(t, dir)
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
				if err := restoreWith(pgtest.Context(t), t, filepath.Join(dir, "a.pgs"), restoreOptions(t, copied, 2)); err != nil {
					t.Fatalf("restore: %v", err)
				}
			}
			for _, table := range []string{"public.big", "public.small"} {
				hash := `SELECT count(*) || ':' || sum(hashtext(t::text)) FROM ` + table + ` t`
				if a, b := pgtest.Scalar(t, c.ConnString("ddl"), hash), pgtest.Scalar(t, copied, hash); a != b {
					t.Errorf("%s: source %s, copy %s", table, a, b)
				}
			}
			if kind.name != "drop" || pgtest.Scalar(t, copied, `to_regclass('public.victim') IS NOT NULL`) == "true" {
				if got := pgtest.Scalar(t, copied, `SELECT count(*) FROM public.victim`); got != fmt.Sprint(victimRows) && !(kind.name == "truncate" && got == "0") {
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
