package main

import (
	"context"
	"fmt"
	"io"
	"net"
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

// TestBadInput checks that every kind of bad input ends with one clear
// error line, a non-zero exit code that says what kind of failure it was,
// and no archive left behind that could pass for a complete one.
func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	for _, db := range []string{"small", "busy"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Exec(ctx, "small", `CREATE TABLE t (id int PRIMARY KEY, v text);
INSERT INTO t SELECT i, repeat(md5(i::text), 20) FROM generate_series(1, 20000) i;
CREATE ROLE app LOGIN PASSWORD 'right-pw';
GRANT SELECT ON t TO app;`)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "busy", "CREATE TABLE existing (x int)"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("small"), "-f", good, "-q")
	archive, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.pgs")
	if err := os.WriteFile(truncated, archive[:len(archive)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	flipped := filepath.Join(dir, "flipped.pgs")
	corrupt := append([]byte(nil), archive...)
	corrupt[len(corrupt)/2] ^= 0x01 // the middle of the file is table data
	if err := os.WriteFile(flipped, corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	noPassfile := []string{"PGPASSFILE=" + filepath.Join(dir, "no-such-passfile")}
	// A port nothing listens on, and one that accepts connections but
	// never answers (the kernel completes the handshake; nobody reads).
	refused := refusedPort(t)
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	mute := silent.Addr().(*net.TCPAddr).Port

	out := filepath.Join(dir, "out.pgs")
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		errSub string
		stdin  string // file to read as standard input
		json   bool   // --progress=json: the error is the last JSON event
	}{
		{"missing database", nil, []string{"dump", "-d", c.ConnString("nosuchdb"), "-f", out}, exitConnection, `database "nosuchdb" does not exist`, "", false},
		{"wrong password", append([]string{"PGPASSWORD=wrong-pw"}, noPassfile...), []string{"dump", "-d", c.TCPConnString("small", "app"), "-f", out}, exitConnection, "password authentication failed", "", false},
		{"unknown codec", nil, []string{"dump", "-d", c.ConnString("small"), "-f", out, "-Z", "brotli"}, exitUsage, "unknown compression method", "", false},
		{"unknown flag", nil, []string{"dump", "--frobnicate"}, exitUsage, "unknown flag", "", false},
		{"unwritable directory", nil, []string{"dump", "-d", c.ConnString("small"), "-f", filepath.Join(dir, "no", "such", "dir.pgs")}, exitFailure, "create archive", "", false},
		{"truncated archive", nil, []string{"restore", "-f", truncated, "-d", c.ConnString("postgres")}, exitFailure, "incomplete", "", false},
		// The archive's own error, named after the file: not the server's
		// "COPY from stdin failed" quoting it.
		{"flipped byte", nil, []string{"restore", "-f", flipped, "-d", c.ConnString("postgres")}, exitFailure, "archive on " + flipped + " is damaged: restore table", "", false},
		{"missing archive", nil, []string{"restore", "-f", filepath.Join(dir, "nope.pgs"), "-d", c.ConnString("postgres")}, exitFailure, "no such file", "", false},
		{"non-empty target", nil, []string{"restore", "-f", good, "-d", c.ConnString("busy")}, exitFailure, "not empty", "", false},
		{"connection refused", nil, []string{"dump", "-d", fmt.Sprintf("host=127.0.0.1 port=%d dbname=small", refused), "-f", out}, exitConnection, "connection refused", "", false},
		{"unknown host", nil, []string{"dump", "-d", "host=no-such-host.invalid dbname=small", "-f", out}, exitConnection, "no-such-host.invalid", "", false},
		{"connect timeout", nil, []string{"dump", "-d", fmt.Sprintf("host=127.0.0.1 port=%d dbname=small connect_timeout=1", mute), "-f", out}, exitConnection, "no answer within connect_timeout (1s)", "", false},
		{"bad --lock-wait-timeout", nil, []string{"dump", "-d", c.ConnString("small"), "-f", out, "--lock-wait-timeout", "abc"}, exitUsage, `invalid --lock-wait-timeout "abc"`, "", false},
		{"bad --lock-wait-timeout, clone", nil, []string{"clone", "--source", c.ConnString("small"), "--target", c.ConnString("busy"), "--lock-wait-timeout", "2 sec"}, exitUsage, "invalid --lock-wait-timeout", "", false},
		{"verify -j 0", nil, []string{"verify", "-j", "0", good}, exitUsage, "-j must be at least 1", "", false},
		{"compare -j 0", nil, []string{"compare", "-j", "0", "--source", c.ConnString("small"), "--target", c.ConnString("small")}, exitUsage, "-j must be at least 1", "", false},
		{"-j 1000", nil, []string{"dump", "-d", c.ConnString("small"), "-f", out, "-j", "1000"}, exitUsage, "-j 1000 is more than pgsprint runs at once (at most 256)", "", false},
		{"-j beyond max_connections, dump", nil, []string{"dump", "-d", c.ConnString("small"), "-f", out, "-j", "200"}, exitFailure, "-j 200 needs 201 more connections", "", false},
		{"-j beyond max_connections, restore", nil, []string{"restore", "-f", good, "-d", c.ConnString("postgres"), "-j", "200"}, exitFailure, "max_connections 100", "", false},
		{"-f a directory", nil, []string{"dump", "-d", c.ConnString("small"), "-f", dir}, exitUsage, "is a directory", "", false},
		{"--to-sql -f - of a truncated archive", nil, []string{"restore", "--to-sql", "-f", "-"}, exitFailure, "archive on standard input is incomplete", truncated, false},
		{"failure under --progress=json", nil, []string{"dump", "-d", c.ConnString("small"), "-f", filepath.Join(dir, "no", "such", "dir.pgs"), "--progress=json"}, exitFailure, "create archive", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			var stdin io.Reader
			if tc.stdin != "" {
				f, err := os.Open(tc.stdin)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				stdin = f
			}
			r := pgsprintStdin(t, append([]string{"TMPDIR=" + tmp}, tc.env...), stdin, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			if tc.json {
				checkErrorEvent(t, r.stderr, tc.code)
			} else {
				checkOneLine(t, r.stderr)
			}
			noTempFiles(t, tmp)
			if !strings.Contains(r.stderr, tc.errSub) {
				t.Errorf("error does not mention %q:\n%s", tc.errSub, r.stderr)
			}
			if strings.Contains(r.stderr, "wrong-pw") || strings.Contains(r.stderr, "right-pw") {
				t.Errorf("error output reveals a password:\n%s", r.stderr)
			}
			pgtest.NoPartialFiles(t, dir, "good.pgs", "truncated.pgs", "flipped.pgs")
		})
	}

	t.Run("Ctrl-C while connecting", func(t *testing.T) {
		// A server that accepts and never answers: once it has accepted,
		// pgsprint is waiting in its connect.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 4)
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- conn
			}
		}()
		tmp := t.TempDir()
		cmd, stderr := startPgsprintEnv(t, []string{"TMPDIR=" + tmp}, "dump", "-d", fmt.Sprintf("host=127.0.0.1 port=%d dbname=small", ln.Addr().(*net.TCPAddr).Port), "-f", out)
		select {
		case conn := <-accepted:
			defer conn.Close()
		case <-time.After(30 * time.Second):
			t.Fatal("pgsprint never connected")
		}
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		checkOneError(t, waitExit(t, cmd), exitInterrupted, stderr.String(), "dump interrupted by SIGINT")
		noTempFiles(t, tmp)
		pgtest.NoPartialFiles(t, dir, "good.pgs", "truncated.pgs", "flipped.pgs")
	})

	t.Run("table dropped while the tables are listed", func(t *testing.T) {
		// The DROP holds its lock until COMMIT: the dump's snapshot still
		// lists the table, and its size waits for the lock, then finds
		// the table gone.
		if err := c.Exec(ctx, "small", "CREATE TABLE dropme (i int)"); err != nil {
			t.Fatal(err)
		}
		dropper, err := pgx.Connect(ctx, c.ConnString("small"))
		if err != nil {
			t.Fatal(err)
		}
		defer dropper.Close(ctx)
		if _, err := dropper.Exec(ctx, "BEGIN; DROP TABLE dropme"); err != nil {
			t.Fatal(err)
		}
		cmd, stderr := startPgsprint(t, "dump", "-d", c.ConnString("small"), "-f", out)
		waitForLockWait(t, c, dropper.PgConn().PID())
		if _, err := dropper.Exec(ctx, "COMMIT"); err != nil {
			t.Fatal(err)
		}
		checkOneError(t, waitExit(t, cmd), exitFailure, stderr.String(), `table "public"."dropme" was dropped by another session`)
		pgtest.NoPartialFiles(t, dir, "good.pgs", "truncated.pgs", "flipped.pgs")
	})

	t.Run("--to-sql -f - reads standard input", func(t *testing.T) {
		tmp := t.TempDir()
		f, err := os.Open(good)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r := pgsprintStdin(t, []string{"TMPDIR=" + tmp}, f, "restore", "--to-sql", "-f", "-")
		if r.code != 0 || !strings.Contains(r.stdout, `COPY "public"."t" ("id", "v") FROM STDIN`) || strings.Count(r.stdout, "\n") < 20000 {
			t.Errorf("exit %d, %d bytes of script; stderr:\n%s", r.code, len(r.stdout), r.stderr)
		}
		noTempFiles(t, tmp)
	})

	t.Run("-v logs each phase and table", func(t *testing.T) {
		r := mustPgsprint(t, "dump", "-d", c.ConnString("small"), "-f", out, "-v")
		for _, want := range []string{"msg=phase phase=catalog", "msg=phase phase=data", `msg="data done" table="\"public\".\"t\"" rows=20000`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("-v output lacks %q:\n%s", want, r.stderr)
			}
		}
		r = mustPgsprint(t, "dump", "-d", c.ConnString("small"), "-f", out)
		if strings.Contains(r.stderr, "level=") {
			t.Errorf("logs without -v:\n%s", r.stderr)
		}
		os.Remove(out)
	})

	t.Run("binary archive refused on a terminal", func(t *testing.T) {
		// script(1) runs the command with a pseudo-terminal as stdout.
		if _, err := exec.LookPath("script"); err != nil {
			t.Skip("script(1) not installed")
		}
		cmd := exec.Command("script", "-qec", binary+" dump -d '"+c.ConnString("small")+"'; echo exit=$?", "/dev/null")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "refusing to write a binary archive to a terminal") || !strings.Contains(string(out), "exit=2") {
			t.Errorf("dump to a terminal was not refused:\n%.500s", out)
		}
	})

	t.Run("password through the environment reaches pg_dump too", func(t *testing.T) {
		env := append([]string{"PGPASSWORD=right-pw"}, noPassfile...)
		r := pgsprint(t, env, "dump", "-d", c.TCPConnString("small", "app"), "-f", out, "-q")
		if r.code != 0 {
			t.Fatalf("dump over TCP with a password: exit %d\n%s", r.code, r.stderr)
		}
		os.Remove(out)
	})
}

// checkOneLine fails unless stderr is exactly one "pgsprint: error:" line.
func checkOneLine(t *testing.T, stderr string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "pgsprint: error: ") {
		t.Errorf("want exactly one error line, got:\n%s", stderr)
	}
}

// checkErrorEvent fails unless every line of stderr is a JSON event and
// the last one is the "error" event with the exit code.
func checkErrorEvent(t *testing.T, stderr string, code int) {
	t.Helper()
	evs := events(t, stderr)
	last := evs[len(evs)-1]
	if last.Event != "error" || last.Error == "" || last.ExitCode != code || strings.Contains(last.Error, "\n") {
		t.Errorf("last event %+v, want an error event with exit code %d", last, code)
	}
}

// waitForLockWait waits until a pgsprint session waits for a lock that
// the session holder holds.
func waitForLockWait(t *testing.T, c *pgtest.Instance, holder uint32) {
	t.Helper()
	admin, err := pgx.Connect(context.Background(), c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'pgsprint' AND $1::int = ANY (pg_blocking_pids(pid))`, int(holder)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no pgsprint session waited for the lock")
}

// TestRestoreAsNonOwner restores, as a role that owns none of the
// archive's objects, without -O: the restore stops with one line that
// names the failing statement and suggests -O and -x, with no program
// prefix printed twice; with -O -x it succeeds.
func TestRestoreAsNonOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "owned"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1); CREATE ROLE bob LOGIN",
		"CREATE DATABASE bobs OWNER bob TEMPLATE template0"} {
		if err := c.Exec(ctx, "owned", s); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "owned.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("owned"), "-f", file, "-q")
	bob := c.ConnString("bobs") + " user=bob"

	r := pgsprint(t, nil, "restore", "-f", file, "-d", bob, "-q")
	msg := strings.TrimSpace(r.stderr)
	t.Log(msg)
	if r.code != 1 || strings.Contains(msg, "\n") {
		t.Fatalf("want exit 1 and one line, got exit %d:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`must be member of role "postgres"`, "statement: ALTER TABLE", "-O (--no-owner)", "-x (--no-privileges)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error lacks %q", want)
		}
	}
	for _, twice := range []string{"pg_restore: pg_restore:", "error: pg_restore: error:"} {
		if strings.Contains(msg, twice) {
			t.Errorf("the error repeats a prefix (%q)", twice)
		}
	}

	for _, s := range []string{"DROP DATABASE bobs", "CREATE DATABASE bobs OWNER bob TEMPLATE template0"} {
		if err := c.Exec(ctx, "postgres", s); err != nil {
			t.Fatal(err)
		}
	}
	mustPgsprint(t, "restore", "-f", file, "-d", bob, "-O", "-x", "-q")
	pgtest.RequireSameData(t, c.ConnString("owned"), bob)

	// A role the archive names and the target lacks: even as superuser
	// the restore stops, and the message names that role, not ownership.
	t.Run("missing role", func(t *testing.T) {
		for _, s := range []string{"CREATE ROLE gone", "CREATE DATABASE gones", "CREATE DATABASE landing"} {
			if err := c.Exec(ctx, "postgres", s); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Exec(ctx, "gones", "CREATE TABLE g (i int); ALTER TABLE g OWNER TO gone"); err != nil {
			t.Fatal(err)
		}
		gone := filepath.Join(t.TempDir(), "gone.pgs")
		mustPgsprint(t, "dump", "-d", c.ConnString("gones"), "-f", gone, "-q")
		for _, s := range []string{"DROP DATABASE gones", "DROP ROLE gone"} {
			if err := c.Exec(ctx, "postgres", s); err != nil {
				t.Fatal(err)
			}
		}
		r := pgsprint(t, nil, "restore", "-f", gone, "-d", c.ConnString("landing"), "-q")
		checkOneError(t, r.code, exitFailure, r.stderr, `role "gone" does not exist (statement: ALTER TABLE public.g OWNER TO gone;) (the archive's objects name role "gone", which the target server lacks: create it first`)
		if strings.Contains(r.stderr, "does not own") {
			t.Errorf("the error still blames ownership:\n%s", r.stderr)
		}
	})
}
