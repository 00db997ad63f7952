package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestFaults: a backend killed mid-dump, a full disk, a row the target
// rejects, Ctrl-C and a restart of the source server (pg_ctl restart -m
// fast, last, since it ends every session) each end the run with a clear one-line error and a
// meaningful exit code, leave no file that looks like an archive, and leave
// no pgsprint session behind on the server.
func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "big"); err != nil {
		t.Fatal(err)
	}
	// About 300 MB: long enough to dump that a test can act while a COPY runs.
	err := c.Exec(ctx, "big", `CREATE TABLE big AS SELECT i, repeat(md5(i::text), 30) AS v FROM generate_series(1, 300000) i;
CREATE TABLE small AS SELECT i FROM generate_series(1, 1000) i; ANALYZE;`)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)

	t.Run("worker backend terminated", func(t *testing.T) {
		dir := t.TempDir()
		cmd, stderr := startPgsprint(t, "dump", "-d", c.ConnString("big"), "-f", filepath.Join(dir, "big.pgs"), "-j", "2", "-Z", "none")
		pid := pgtest.WaitForCopy(t, admin, "COPY%TO STDOUT%")
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatal(err)
		}
		code := waitExit(t, cmd)
		checkOneError(t, code, exitFailure, stderr.String(), "terminat")
		pgtest.NoPartialFiles(t, dir)
		pgtest.NoSessionsLeft(t, admin)
	})

	t.Run("table locked past --lock-wait-timeout", func(t *testing.T) {
		dir := t.TempDir()
		locker, err := pgx.Connect(ctx, c.ConnString("big"))
		if err != nil {
			t.Fatal(err)
		}
		defer locker.Close(ctx)
		if _, err := locker.Exec(ctx, "BEGIN; LOCK TABLE small IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "dump", "-d", c.ConnString("big"), "-f", filepath.Join(dir, "big.pgs"), "--lock-wait-timeout", "300ms")
		checkOneError(t, r.code, exitFailure, r.stderr, "within --lock-wait-timeout (300ms)")
		pgtest.NoPartialFiles(t, dir)
		if _, err := locker.Exec(ctx, "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		pgtest.NoSessionsLeft(t, admin)
	})

	t.Run("disk full", func(t *testing.T) {
		dir := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a small tmpfs to fill (needs root): %v %s", err, out)
		}
		defer exec.Command("umount", dir).Run()
		// About 300 MB estimated from the tables' sizes: refused before
		// the archive is created.
		r := pgsprint(t, nil, "dump", "-d", c.ConnString("big"), "-f", filepath.Join(dir, "big.pgs"), "-Z", "none")
		checkOneError(t, r.code, exitFailure, r.stderr, "free space, or write the archive elsewhere")
		pgtest.NoPartialFiles(t, dir)
		// dump --all checks the same estimate (CreateArchive), its
		// databases' plans summed.
		r = pgsprint(t, nil, "dump", "--all", "-d", c.ConnString("postgres"), "-f", filepath.Join(dir, "all.pgs"), "-Z", "none")
		checkOneError(t, r.code, exitFailure, r.stderr, "free space, or write the archive elsewhere")
		pgtest.NoPartialFiles(t, dir)
		// Values kept in TOAST, which the estimate (the tables' main
		// forks) leaves out: 8 MB of COPY text fill the 4 MB as they
		// are written.
		if err := c.Exec(ctx, "big", `CREATE TABLE toasty AS SELECT i, repeat('x', 1000000) AS v FROM generate_series(1, 8) i`); err != nil {
			t.Fatal(err)
		}
		r = pgsprint(t, nil, "dump", "-d", c.ConnString("big"), "-t", "toasty", "-f", filepath.Join(dir, "big.pgs"), "-Z", "none")
		checkOneError(t, r.code, exitFailure, r.stderr, "no space left on device")
		pgtest.NoPartialFiles(t, dir)
		if err := c.Exec(ctx, "big", `DROP TABLE toasty`); err != nil {
			t.Fatal(err)
		}
		pgtest.NoSessionsLeft(t, admin)
	})

	// An archive of big for the restores below (the row the target
	// rejects included), and one of small for the quick second runs.
	archives := t.TempDir()
	bigFile, smallFile := filepath.Join(archives, "big.pgs"), filepath.Join(archives, "small.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("big"), "-f", bigFile, "-q")
	mustPgsprint(t, "dump", "-d", c.ConnString("big"), "-t", "small", "-f", smallFile, "-q")
	t.Run("target rejects a row", func(t *testing.T) {
		if err := c.CreateDB(ctx, "strict"); err != nil {
			t.Fatal(err)
		}
		// The target adds a constraint the source never had to a table
		// it creates, so loading "big" fails on one row of its first
		// chunk, while the other connection loads another: the run
		// stops that one too (no session left), without loading the
		// rest of the 300 MB first.
		err := c.Exec(ctx, "strict", `CREATE FUNCTION strict_check() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_event_trigger_ddl_commands() WHERE object_identity = 'public.big') THEN
    ALTER TABLE public.big ADD CONSTRAINT no_777 CHECK (i <> 777);
  END IF;
END $$;
CREATE EVENT TRIGGER strict ON ddl_command_end WHEN TAG IN ('CREATE TABLE') EXECUTE FUNCTION strict_check();`)
		if err != nil {
			t.Fatal(err)
		}
		// The event trigger makes the target non-empty: --clean accepts
		// it (and drops only the archive's objects, none of which exist).
		r := pgsprint(t, nil, "restore", "-f", bigFile, "-d", c.ConnString("strict"), "-j", "2", "--clean")
		checkOneError(t, r.code, exitFailure, r.stderr, `"public"."big"`)
		if !strings.Contains(r.stderr, "no_777") {
			t.Errorf("error does not name the violated constraint: %s", r.stderr)
		}
		pgtest.NoSessionsLeft(t, admin)
	})

	targets := 0
	newTarget := func(t *testing.T) string {
		t.Helper()
		targets++
		name := fmt.Sprintf("target%d", targets)
		if err := c.CreateDB(ctx, name); err != nil {
			t.Fatal(err)
		}
		return c.ConnString(name)
	}
	// run is one command of the tests below, started in dir (for a dump's
	// archive) with TMPDIR tmp (for everything else pgsprint writes).
	type run struct {
		op   string
		args func(t *testing.T, dir string) []string
		copy string // the query to wait for before acting
	}
	dumpRun := run{"dump", func(t *testing.T, dir string) []string {
		return []string{"dump", "-d", c.ConnString("big"), "-f", filepath.Join(dir, "big.pgs"), "-j", "2", "-Z", "none", "--progress", "none"}
	}, "COPY%TO STDOUT%"}
	// --progress none: on a slow machine a run still reading its schema
	// after 5 s writes a progress line before the signal's one error line.
	// A load's COPY is sent with its BEGIN ("BEGIN; COPY ..."), FREEZE's
	// after a TRUNCATE of its own.
	restoreRun := run{"restore", func(t *testing.T, dir string) []string {
		return []string{"restore", "-f", bigFile, "-d", newTarget(t), "-j", "2", "--progress", "none"}
	}, "%COPY%FROM STDIN%"}
	cloneRun := run{"clone", func(t *testing.T, dir string) []string {
		return []string{"clone", "--source", c.ConnString("big"), "--target", newTarget(t), "-j", "2", "--progress", "none"}
	}, "%COPY%FROM STDIN%"}

	// SIGINT (Ctrl-C), SIGTERM (kill) and SIGHUP (the terminal closed)
	// stop a run the same way: one line naming the signal, nothing left in
	// the archive's directory or the temp directory, no session left.
	for _, tc := range []struct {
		run      run
		sig      syscall.Signal
		code     int
		longOnly bool // under make test-long only: SIGINT's twin
	}{
		{dumpRun, syscall.SIGINT, exitInterrupted, false},
		{dumpRun, syscall.SIGTERM, exitInterrupted, true},
		{dumpRun, syscall.SIGHUP, exitHangup, false},
		{restoreRun, syscall.SIGHUP, exitHangup, false},
		{cloneRun, syscall.SIGHUP, exitHangup, false},
	} {
		name := signalName(tc.sig)
		t.Run(tc.run.op+" "+name, func(t *testing.T) {
			if tc.longOnly && !long {
				t.Skip("under make test-long only: SIGTERM stops a run as SIGINT does, with the same exit code")
			}
			dir, tmp := t.TempDir(), t.TempDir()
			cmd, stderr := startPgsprintEnv(t, []string{"TMPDIR=" + tmp}, tc.run.args(t, dir)...)
			pgtest.WaitForCopy(t, admin, tc.run.copy)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, cmd)
			checkOneError(t, code, tc.code, stderr.String(), tc.run.op+" interrupted by "+name)
			pgtest.NoPartialFiles(t, dir)
			noTempFiles(t, tmp)
			pgtest.NoSessionsLeft(t, admin)
		})
	}

	// nohup means it: SIGHUP, ignored when pgsprint starts, stays ignored.
	t.Run("dump SIGHUP under nohup", func(t *testing.T) {
		if _, err := exec.LookPath("nohup"); err != nil {
			t.Skip("nohup not installed")
		}
		dir := t.TempDir()
		cmd := exec.Command("nohup", append([]string{binary}, dumpRun.args(t, dir)...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		pgtest.WaitForCopy(t, admin, dumpRun.copy)
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd); code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, stderr.String())
		}
		pgtest.NoPartialFiles(t, dir, "big.pgs")
	})

	// SIGKILL leaves the partial archive or the extracted schema behind;
	// the next run in the same place removes it and names it.
	for _, tc := range []struct {
		run   run
		stale string // what the killed run leaves: a pattern of dir's or tmp's
		again []string
	}{
		// Not -q, which would keep the warning in.
		{dumpRun, ".big.pgs.partial-%d-*", []string{"dump", "-d", c.ConnString("big"), "-t", "small", "--progress", "none"}},
		{restoreRun, "pgsprint-schema-%d-*.dump", []string{"restore", "-f", smallFile, "--progress", "none"}},
		{cloneRun, "pgsprint-schema-%d-*.dump", []string{"clone", "--source", c.ConnString("big"), "-t", "small", "--progress", "none"}},
	} {
		t.Run(tc.run.op+" SIGKILL then again", func(t *testing.T) {
			dir, tmp := t.TempDir(), t.TempDir()
			env := []string{"TMPDIR=" + tmp}
			cmd, _ := startPgsprintEnv(t, env, tc.run.args(t, dir)...)
			pgtest.WaitForCopy(t, admin, tc.run.copy)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			waitExit(t, cmd)
			left, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf(tc.stale, cmd.Process.Pid)))
			inTmp, _ := filepath.Glob(filepath.Join(tmp, fmt.Sprintf(tc.stale, cmd.Process.Pid)))
			left = append(left, inTmp...)
			if len(left) != 1 {
				t.Fatalf("the killed run left %v, want one file like %s", left, tc.stale)
			}
			args := tc.again
			switch tc.run.op {
			case "dump":
				args = append(args, "-f", filepath.Join(dir, "big.pgs"))
			case "restore":
				args = append(args, "-d", newTarget(t))
			case "clone":
				args = append(args, "--target", newTarget(t))
			}
			r := pgsprint(t, env, args...)
			if r.code != 0 {
				t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, "removed a stale temporary file left by a killed run") ||
				!strings.Contains(r.stderr, left[0]) || !strings.Contains(r.stderr, fmt.Sprintf("pid=%d", cmd.Process.Pid)) {
				t.Errorf("the second run did not name %s of pid %d:\n%s", left[0], cmd.Process.Pid, r.stderr)
			}
			if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
				t.Errorf("%s is still there: %v", left[0], err)
			}
			pgtest.NoPartialFiles(t, dir, "big.pgs")
			noTempFiles(t, tmp)
		})
	}

	// An encrypted archive's schema is decrypted into a memfd, never a
	// file: a restore killed mid-way leaves no plaintext in its TMPDIR.
	t.Run("encrypted restore SIGKILL leaves no schema", func(t *testing.T) {
		dir, tmp := t.TempDir(), t.TempDir()
		key, pub, _ := writeIdentity(t, dir, "key.txt")
		sealed := filepath.Join(dir, "sealed.pgs")
		mustPgsprint(t, "dump", "-d", c.ConnString("big"), "-f", sealed, "-q", "--encrypt-to", pub)
		cmd, _ := startPgsprintEnv(t, []string{"TMPDIR=" + tmp}, "restore", "-f", sealed, "-d", newTarget(t), "-j", "2", "--identity", key)
		pgtest.WaitForCopy(t, admin, restoreRun.copy)
		// While it loads, the schema pg_restore read is a memfd of its.
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", cmd.Process.Pid))
		inMemory := false
		for _, fd := range fds {
			l, _ := os.Readlink(fd)
			inMemory = inMemory || strings.HasPrefix(l, "/memfd:pgsprint-schema")
		}
		if !inMemory {
			t.Errorf("the running restore holds no memfd of the schema (fds %v)", fds)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		waitExit(t, cmd)
		if left, _ := filepath.Glob(filepath.Join(tmp, "pgsprint-schema-*")); len(left) != 0 {
			t.Errorf("the killed encrypted restore left %v", left)
		}
		noTempFiles(t, tmp)
	})

	// Last: the restart ends every session, admin's included.
	t.Run("source server restarts", func(t *testing.T) {
		dir := t.TempDir()
		cmd, stderr := startPgsprint(t, "dump", "-d", c.ConnString("big"), "-f", filepath.Join(dir, "big.pgs"), "-j", "2", "-Z", "none")
		pgtest.WaitForCopy(t, admin, "COPY%TO STDOUT%")
		// Restart while the data is copied, once pg_dump has written the
		// schema: the error to check is the copy's.
		for range 200 {
			var n int
			if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg_dump'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := c.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		code := waitExit(t, cmd)
		checkOneError(t, code, exitFailure, stderr.String(), "restart")
		pgtest.NoPartialFiles(t, dir)
		after, err := pgx.Connect(ctx, c.ConnString("postgres"))
		if err != nil {
			t.Fatalf("the server is not usable after its restart: %v", err)
		}
		defer after.Close(ctx)
		pgtest.NoSessionsLeft(t, after)
		// And a dump works again (of the small table: the 300 MB were
		// dumped whole above).
		mustPgsprint(t, "dump", "-d", c.ConnString("big"), "-t", "small", "-f", filepath.Join(dir, "again.pgs"), "-q")
		pgtest.NoPartialFiles(t, dir, "again.pgs")
	})
}
