package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// pgsprintEnv is mustPgsprint with extra environment variables.
func pgsprintEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r := pgsprint(t, env, args...)
	if r.code != 0 {
		t.Fatalf("pgsprint %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// TestAllCleanKilled: clone --all --clean and restore --all --clean over a
// target that holds the source's databases (with an object of its own in
// each, which the copy must not keep), killed with SIGKILL right after a
// database was dropped (its CREATE DATABASE held back by a lock on
// template0: then cancelled, so the database is gone, or let through, so
// it is empty and has no journal; `make test` runs one of the two for
// each command), and at random points once the globals are in, then again
// while resuming (`make test-long` once more); each time finished with
// --resume: every database is there, equal to the source's, none of the
// target's own objects is left, and no journal either. `make test` runs
// one of the two commands, the one the seed picks; `make test-long` both.
func TestAllCleanKilled(t *testing.T) {
	t.Parallel()
	src := pgtest.New(t)
	loadPipeServer(t, src)
	file := filepath.Join(t.TempDir(), "server.pgs")
	mustPgsprint(t, "dump", "--all", "-d", src.ConnString("postgres"), "-f", file)
	commands := []struct {
		name string
		args func(dst *pgtest.Instance) []string
		// cancels are the kills right after a drop: with its CREATE
		// DATABASE cancelled (true) or let through (false). `make test`
		// runs one per command, `make test-long` both for each.
		cancels []bool
	}{
		{"clone", func(dst *pgtest.Instance) []string {
			return []string{"clone", "--all", "--source", src.ConnString("postgres"), "--target", dst.ConnString("postgres"), "-j", "2", "--chunk-size", "256kB"}
		}, everyOr(true)},
		{"restore", func(dst *pgtest.Instance) []string {
			return []string{"restore", "--all", "-f", file, "-d", dst.ConnString("postgres"), "-j", "2"}
		}, everyOr(false)},
	}
	if !long {
		// Both commands resume through the same whole-server journal
		// (internal/cluster): over runs, the seeds take both.
		_, rng := pgtest.Seeded(t, "", 1)
		i := rng.IntN(len(commands))
		commands = commands[i : i+1]
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dst := pgtest.New(t)
			args := c.args(dst)
			mustPgsprint(t, args...)
			conn, err := pgx.Connect(ctx, dst.ConnString("postgres"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			resume := append(slices.Clone(args), "--resume")
			for _, cancel := range c.cancels {
				addStaleTables(t, dst)
				killAfterDrop(t, dst, conn, cancel, append(slices.Clone(args), "--clean")...)
				mustPgsprint(t, resume...)
				requireCleaned(t, src, dst, conn)
			}
			addStaleTables(t, dst)
			_, rng := pgtest.Seeded(t, "", 1)
			run := append(slices.Clone(args), "--clean")
			done := false
			for i := 0; i < pgtest.Repeat(2, 3) && !done; i++ {
				cmd, exited := startUntilGlobals(t, conn, run...)
				select {
				case <-exited:
					t.Logf("run %d finished before the kill", i)
				case <-time.After(time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))):
					cmd.Process.Kill()
					<-exited
					t.Logf("run %d killed", i)
				}
				done = cmd.ProcessState.Success()
				run = resume
			}
			if !done {
				t.Log(mustPgsprint(t, run...).stderr)
			}
			requireCleaned(t, src, dst, conn)
		})
	}
}

// cleanedDatabases are the databases of loadPipeServer that --clean
// drops and creates again on the target: not postgres, which every
// server has (--clean drops the archive's objects there, not the
// database, as pg_dumpall --clean).
var cleanedDatabases = []string{"notes", "shop"}

// addStaleTables gives each of cleanedDatabases on dst a table of the
// target's own, which a --clean copy must not keep.
func addStaleTables(t *testing.T, dst *pgtest.Instance) {
	t.Helper()
	for _, db := range cleanedDatabases {
		if err := dst.Exec(context.Background(), db, "CREATE TABLE stale_target_table (x int)"); err != nil {
			t.Fatal(err)
		}
	}
}

// requireCleaned checks a finished --clean copy of src on dst (conn, its
// postgres): no server journal, the same server, and no stale table left.
func requireCleaned(t *testing.T, src, dst *pgtest.Instance, conn *pgx.Conn) {
	t.Helper()
	if markerRole(conn) {
		t.Error("the whole-server journal outlived the completed run")
	}
	if err := dst.Exec(context.Background(), "postgres", "DROP TABLE IF EXISTS stale_target_table"); err != nil {
		t.Fatal(err)
	}
	requireSameServer(t, src, dst)
	for _, db := range cleanedDatabases {
		if got := pgtest.Scalar(t, dst.ConnString(db), "SELECT count(*) FROM pg_class WHERE relname = 'stale_target_table'"); got != "0" {
			t.Errorf("database %s keeps the target's own table", db)
		}
	}
}

// killAfterDrop runs pgsprint with args, a whole-server --clean copy into
// dst (conn: its postgres), while the test holds a lock on template0 that
// makes CREATE DATABASE wait (COMMENT ON DATABASE takes SHARE UPDATE
// EXCLUSIVE, CREATE DATABASE ... TEMPLATE template0 wants SHARE), and
// kills it with SIGKILL once a CREATE DATABASE waits, that is, right after
// the drop of the database it creates. With cancel, the waiting CREATE
// DATABASE is cancelled too, so that the database is gone; without, it goes
// through once the lock is released, leaving the database empty and
// without a journal.
func killAfterDrop(t *testing.T, dst *pgtest.Instance, conn *pgx.Conn, cancel bool, args ...string) {
	t.Helper()
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, dst.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "COMMENT ON DATABASE template0 IS 'held by the test'"); err != nil {
		t.Fatal(err)
	}
	cmd, stderr := startPgsprint(t, args...)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	const waiting = `FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE 'CREATE DATABASE%' AND pid <> pg_backend_pid()`
	for deadline := time.Now().Add(2 * time.Minute); ; {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) "+waiting).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		select {
		case <-exited:
			t.Fatalf("%s ended before it created a database: %s", args[0], stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no CREATE DATABASE waited on template0 within 2 minutes")
		}
	}
	cmd.Process.Kill()
	<-exited
	if cancel {
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) "+waiting); err != nil {
			t.Fatal(err)
		}
	}
	var gone []string
	for _, db := range cleanedDatabases {
		if pgtest.Scalar(t, dst.ConnString("postgres"), "SELECT count(*) FROM pg_database WHERE datname = "+pg.Literal(db)) == "0" {
			gone = append(gone, db)
		}
	}
	if len(gone) == 0 {
		t.Fatal("killed right after a drop, yet every database is there")
	}
	t.Logf("killed with %v dropped (cancel %v)", gone, cancel)
}

// TestAllCleanRefuses: a --clean run that would drop databases it could
// not create again (as a non-superuser: one that may not become the
// owner, an owner missing on the target, no CREATEDB) refuses before it
// changes anything, in one line with exit 1: the target's databases are
// still there, with their own objects, and no journal was made.
func TestAllCleanRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := pgtest.New(t)
	loadPipeServer(t, src)
	file := filepath.Join(t.TempDir(), "server.pgs")
	mustPgsprint(t, "dump", "--all", "-d", src.ConnString("postgres"), "-f", file)
	dst := pgtest.New(t)
	mustPgsprint(t, "restore", "--all", "-f", file, "-d", dst.ConnString("postgres"))
	addStaleTables(t, dst)
	// admin owns the databases, so it may drop them, and may become the
	// superuser, who owns notes in the archive, but not carol, who owns
	// shop.
	if err := dst.Exec(ctx, "postgres", `CREATE ROLE admin LOGIN CREATEDB CREATEROLE; ALTER DATABASE shop OWNER TO admin; ALTER DATABASE notes OWNER TO admin;
		DO $$ BEGIN EXECUTE format('GRANT %I TO admin', current_user); END $$`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dst.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	as := dst.ConnString("postgres") + " user=admin"
	for _, c := range []struct {
		name, setup, want string
	}{
		{"not the owner", "", `its owner "carol" is a role "admin" cannot become`},
		{"owner missing", "REASSIGN OWNED BY carol TO admin; DROP OWNED BY carol", `its owner "carol" does not exist on the target`},
		{"no createdb", "ALTER ROLE admin NOCREATEDB", `role "admin" may not create databases`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != "" {
				for _, db := range []string{"shop", "notes", "postgres"} {
					if err := dst.Exec(ctx, db, c.setup); err != nil {
						t.Fatal(err)
					}
				}
				if c.name == "owner missing" {
					if err := dst.Exec(ctx, "postgres", "DROP ROLE carol"); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, args := range [][]string{
				{"restore", "--all", "--clean", "-f", file, "-d", as},
				{"clone", "--all", "--clean", "--source", src.ConnString("postgres"), "--target", as},
			} {
				r := pgsprint(t, nil, args...)
				if r.code != 1 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
					t.Errorf("%s: exit %d, want 1 and one line saying %s:\n%s", args[0], r.code, c.want, r.stderr)
				}
				if markerRole(conn) {
					t.Errorf("%s: a whole-server journal was made", args[0])
				}
				for _, db := range cleanedDatabases {
					if got := pgtest.Scalar(t, dst.ConnString(db), "SELECT count(*) FROM pg_class WHERE relname = 'stale_target_table'"); got != "1" {
						t.Errorf("%s: database %s lost the target's own table", args[0], db)
					}
				}
			}
		})
	}
}

// TestAllFailsClean: a clone --all and a dump --all whose pg_dump cannot
// lock a table (another session holds it ACCESS EXCLUSIVE beyond
// --lock-wait-timeout) fail in one line, exit 1, without a panic, and
// leave no temporary file and no pg_dump (nor any session of theirs) on
// the source.
func TestAllFailsClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := pgtest.New(t)
	loadPipeServer(t, src)
	dst := pgtest.New(t)
	holder, err := pgx.Connect(ctx, src.ConnString("shop"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, "BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, src.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, args := range [][]string{
		{"clone", "--all", "--clean", "--source", src.ConnString("postgres"), "--target", dst.ConnString("postgres"), "-j", "2", "--lock-wait-timeout", "300ms"},
		{"dump", "--all", "-d", src.ConnString("postgres"), "-f", filepath.Join(t.TempDir(), "all.pgs"), "-j", "2", "--lock-wait-timeout", "300ms"},
	} {
		t.Run(args[0], func(t *testing.T) {
			tmp := t.TempDir()
			r := pgsprint(t, []string{"TMPDIR=" + tmp}, args...)
			t.Log(r.stderr)
			if r.code != 1 || strings.Contains(r.stderr, "panic") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, want 1 and one line:\n%s", r.code, r.stderr)
			}
			noTempFiles(t, tmp)
			// A backend ends a moment after its client has gone.
			var left int
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name IN ('pgsprint', 'pg_dump') AND pid <> pg_backend_pid()`).Scan(&left); err != nil {
					t.Fatal(err)
				}
				if left == 0 || time.Now().After(deadline) {
					break
				}
			}
			if left != 0 {
				t.Errorf("%d sessions of the failed run left on the source", left)
			}
		})
	}
}
