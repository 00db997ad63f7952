package main

// Helpers shared by this package's tests: running the binary, waiting for
// it and reading its errors, querying the server, and the checks that many
// tests make.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// result is one finished run of the binary.
type result struct {
	code   int
	stdout string
	stderr string
}

// pgsprint runs the binary with args and extra environment variables.
func pgsprint(t testing.TB, env []string, args ...string) result {
	t.Helper()
	return pgsprintStdin(t, env, nil, args...)
}

// pgsprintStdin is pgsprint with stdin (nil: none) as standard input.
func pgsprintStdin(t testing.TB, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = runEnv(t, env)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run pgsprint %v: %v", args, err)
	}
	return r
}

// runEnv is the environment of one run: the test's, plus env, with a
// TMPDIR of the test's own unless env names one. Tests run in parallel,
// and a run sweeps the temporary files of killed runs in its TMPDIR
// (saying so on stderr), so a shared one would let one test's kill show
// up in another test's output.
func runEnv(t testing.TB, env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "TMPDIR=") {
			return append(os.Environ(), env...)
		}
	}
	return append(append(os.Environ(), env...), "TMPDIR="+t.TempDir())
}

// mustPgsprint runs the binary and fails the test unless it exits 0.
func mustPgsprint(t testing.TB, args ...string) result {
	t.Helper()
	r := pgsprint(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("pgsprint %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// noTempFiles fails if the temporary directory dir (a run's TMPDIR)
// holds anything: every exit pgsprint survives removes its temporary files.
func noTempFiles(t testing.TB, dir string) {
	t.Helper()
	pgtest.NoPartialFiles(t, dir)
}

// startPgsprint starts the binary in the background.
func startPgsprint(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return startPgsprintEnv(t, nil, args...)
}

// startPgsprintEnv is startPgsprint with extra environment variables.
func startPgsprintEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = runEnv(t, env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, &stderr
}

func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(time.Minute):
		t.Fatal("pgsprint did not exit within a minute")
		return -1
	}
}

func checkOneError(t *testing.T, code, wantCode int, stderr, sub string) {
	t.Helper()
	t.Logf("exit %d: %s", code, strings.TrimSpace(stderr))
	if code != wantCode {
		t.Errorf("exit code %d, want %d; stderr:\n%s", code, wantCode, stderr)
	}
	// Progress lines (stderr is not a terminal) may come before the error,
	// and so may the warning naming a killed run's temporary file that
	// this run removed.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !progressLine.MatchString(l) && !staleRemoved.MatchString(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "pgsprint: error: ") {
		t.Errorf("want exactly one error line, got:\n%s", stderr)
	}
	if !strings.Contains(strings.ToLower(stderr), strings.ToLower(sub)) {
		t.Errorf("error does not mention %q:\n%s", sub, stderr)
	}
}

// requireNoJournal fails if pgsprint's journal outlived a completed run.
func requireNoJournal(t *testing.T, target *pgx.Conn) {
	t.Helper()
	var journal bool
	if err := target.QueryRow(context.Background(), "SELECT to_regnamespace('pgsprint_journal') IS NOT NULL").Scan(&journal); err != nil {
		t.Fatal(err)
	}
	if journal {
		t.Error("the journal schema outlived a completed run")
	}
}

// journalHas reports whether the target's journal has a step like pattern.
func journalHas(target *pgx.Conn, pattern string) bool {
	var ok bool
	err := target.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pgsprint_journal.steps WHERE step LIKE $1)`, pattern).Scan(&ok)
	return err == nil && ok
}

// runPipeline runs the commands as cmd1 | cmd2 | ... and returns each
// one's result. An element starting with "pgsprint" runs the binary.
func runPipeline(t *testing.T, cmds ...[]string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	procs := make([]*exec.Cmd, len(cmds))
	stderrs := make([]bytes.Buffer, len(cmds))
	var last bytes.Buffer
	var prev *os.File
	for i, args := range cmds {
		name := args[0]
		if name == "pgsprint" {
			name = binary
		}
		c := exec.CommandContext(ctx, name, args[1:]...)
		c.Stderr = &stderrs[i]
		if prev != nil {
			c.Stdin = prev
		}
		if i < len(cmds)-1 {
			r, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			c.Stdout = pw
			defer r.Close()
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pw.Close()
			if prev != nil {
				prev.Close()
			}
			prev = r
		} else {
			c.Stdout = &last
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if prev != nil {
				prev.Close()
			}
		}
		procs[i] = c
	}
	out := make([]result, len(cmds))
	for i, c := range procs {
		err := c.Wait()
		out[i].stderr = stderrs[i].String()
		if ee, ok := err.(*exec.ExitError); ok {
			out[i].code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v", cmds[i], err)
		}
	}
	out[len(out)-1].stdout = last.String()
	return out
}

// events parses --progress=json output: every line must be one JSON object.
func events(t *testing.T, stderr string) []progress.Event {
	t.Helper()
	var evs []progress.Event
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var e progress.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("progress line is not JSON: %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

// serverRun is what the JSON events of a whole-server run (restore --all,
// clone --all) say: the rows of each database's table events (every table
// must be named after its database), the phases, every plan announced and
// every progress state, and the summary, which must come last.
type serverRun struct {
	rows    map[string]int64
	phases  map[string]bool
	plans   []progress.Expected
	states  []progress.State
	summary progress.Summary
}

// readServerRun reads the --progress=json output of a whole-server run.
func readServerRun(t *testing.T, stderr string) serverRun {
	t.Helper()
	r := serverRun{rows: map[string]int64{}, phases: map[string]bool{}}
	evs := events(t, stderr)
	for _, e := range evs {
		switch e.Event {
		case "start":
			r.plans = append(r.plans, *e.Expected)
		case "phase":
			r.phases[e.Phase] = true
		case "progress":
			if len(r.plans) > 0 {
				r.states = append(r.states, *e.State)
			}
		case "table":
			db, _, ok := strings.Cut(e.Work.Table, ": ")
			if !ok {
				t.Errorf("table event without its database: %+v", e.Work)
			}
			r.rows[db] += e.Rows
		}
	}
	last := evs[len(evs)-1]
	if last.Event != "summary" {
		t.Fatalf("last event: %+v", last)
	}
	r.summary = *last.Summary
	return r
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// progressLine matches a progress line such as "restore 5.001s: data and indexes, ...".
// staleRemoved is the warning of a run that removed a killed run's
// temporary file (internal/tempfile.Sweep).
var staleRemoved = regexp.MustCompile(`level=WARN msg="removed a stale temporary file left by a killed run" file=\S+ pid=[0-9]+$`)

var progressLine = regexp.MustCompile(`^(dump|restore) [0-9.]+(ms|s|m[0-9.]*s|h[0-9hm.]*s): `)

// sharedInstance is one test's view of the package's shared cluster
// (pgtest.Shared): the databases it names are its own, made unique by a
// suffix (Name), created by CreateDB or TortureDB and dropped when the
// test ends, so that tests sharing one server can run in parallel. Tests
// that change anything server-wide (settings, roles, restarts) start
// their own cluster with pgtest.New instead.
type sharedInstance struct {
	*pgtest.Instance
	t      testing.TB
	suffix string
}

// sharedDBs numbers the tests that use the shared cluster.
var sharedDBs atomic.Int64

// shared returns the test's view of the shared cluster.
func shared(t testing.TB) *sharedInstance {
	t.Helper()
	return &sharedInstance{Instance: pgtest.Shared(t), t: t, suffix: fmt.Sprintf("_%d", sharedDBs.Add(1))}
}

// Name is the real name of the test's database db ("postgres" and the
// templates are the server's own).
func (s *sharedInstance) Name(db string) string {
	switch db {
	case "postgres", "template0", "template1":
		return db
	}
	return db + s.suffix
}

// ConnString reaches the test's database db over the unix socket.
func (s *sharedInstance) ConnString(db string) string { return s.Instance.ConnString(s.Name(db)) }

// TCPConnString reaches the test's database db over TCP as user.
func (s *sharedInstance) TCPConnString(db, user string) string {
	return s.Instance.TCPConnString(s.Name(db), user)
}

// CreateDB creates the test's database db, dropped when the test ends.
func (s *sharedInstance) CreateDB(ctx context.Context, db string) error {
	if err := s.Instance.CreateDB(ctx, s.Name(db)); err != nil {
		return err
	}
	s.dropAtEnd(db)
	return nil
}

// TortureDB creates the test's database db holding the torture schema
// (pgtest.CopyTorture), dropped when the test ends.
func (s *sharedInstance) TortureDB(db string) {
	s.t.Helper()
	pgtest.CopyTorture(s.t, s.Instance, s.Name(db))
	s.dropAtEnd(db)
}

func (s *sharedInstance) dropAtEnd(db string) {
	name := s.Name(db)
	s.t.Cleanup(func() { pgtest.DropDB(s.t, s.Instance, name) })
}

// Exec runs sql in the test's database db (see pgtest.Instance.Exec).
func (s *sharedInstance) Exec(ctx context.Context, db, sql string) error {
	return s.Instance.Exec(ctx, s.Name(db), sql)
}

// ExecPsql runs script with psql in the test's database db.
func (s *sharedInstance) ExecPsql(ctx context.Context, db, script string) error {
	return s.Instance.ExecPsql(ctx, s.Name(db), script)
}

// dbServer is what the helpers need of a cluster: a *pgtest.Instance, or a
// test's *sharedInstance (whose database names are the test's own).
type dbServer interface {
	ConnString(db string) string
	BinDir() string
}

// everyOr is the cases of a two-way choice a test runs: both under `make
// test-long`, only short under `make test`.
func everyOr(short bool) []bool {
	if long {
		return []bool{true, false}
	}
	return []bool{short}
}

// spyPgRestore makes a directory of binDir's client programs whose
// pg_restore first appends its arguments, one run a line, to a log, then
// runs the real one: env points pgsprint at it (PGSPRINT_PG_BIN), and
// calls reads the log.
func spyPgRestore(t *testing.T, binDir string) (env []string, calls func() string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "pg_restore.calls")
	for _, p := range []string{"pg_dump", "pg_dumpall", "psql"} {
		if err := os.Symlink(filepath.Join(binDir, p), filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\necho \" $* \" >> " + shellQuote(log) + "\nexec " + shellQuote(filepath.Join(binDir, "pg_restore")) + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "pg_restore"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{pgbin.EnvBinDir + "=" + dir}, func() string {
		b, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
}

// refusedPort is a TCP port of 127.0.0.1 that refuses connections for the
// rest of the test: a socket bound to it that does not listen. A port
// found free and closed again could be taken meanwhile by a server that
// a test running alongside starts (a test's "connection refused" met
// another cluster's "password authentication failed").
func refusedPort(t *testing.T) int {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return sa.(*syscall.SockaddrInet4).Port
}
