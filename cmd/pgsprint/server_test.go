package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDumpAllRestoreAll: what the binary says of a whole server (the
// databases dumped and skipped, the summary, list, the passwords warning,
// the roles kept by clone --all and restore --all), restore --all
// --to-sql loaded by psql alone, the refusals' one line and exit code, and
// a restore --all SIGKILLed and finished with --resume. The round trip's
// equality (globals, every database's schema and rows, after dump --all,
// clone --all, restore --all, --database) is internal/cluster's
// TestServerRoundTrip.
func TestDumpAllRestoreAll(t *testing.T) {
	t.Parallel()
	src := pgtest.New(t)
	ts := pgtest.TablespaceDir(t)
	pgtest.LoadServer(t, src, ts)
	bin := src.BinDir()
	wantGlobals := pgtest.GlobalsDump(t, bin, src.ConnString("postgres"))
	wantData := map[string]map[string]string{}
	for _, db := range pgtest.ServerDatabases {
		wantData[db] = pgtest.Fingerprint(t, src.ConnString(db))
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "server.pgs")
	r := mustPgsprint(t, "dump", "--all", "-d", src.ConnString("postgres"), "-f", file, "-j", "2", "--chunk-size", "256kB", "--exclude-database", "skip*")
	for _, want := range []string{"databases: app, lat, postgres", "noconn (does not allow connections)", "skipme (--exclude-database)", "template1 (template)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("dump --all output lacks %q:\n%s", want, r.stderr)
		}
	}
	var tables, chunks int
	if i := strings.Index(r.stderr, "dumped "); i < 0 {
		t.Errorf("no summary:\n%s", r.stderr)
	} else if _, err := fmt.Sscanf(r.stderr[i:], "dumped %d tables in %d chunks", &tables, &chunks); err != nil || tables != 5 || chunks <= tables {
		t.Errorf("want 5 tables, app.orders in several chunks (%v):\n%s", err, r.stderr)
	}
	pgtest.NoPartialFiles(t, dir, "server.pgs")
	r = mustPgsprint(t, "list", file)
	for _, want := range []string{"roles:      alice, bob, postgres, readers", "tablespaces: space1", "format 5", "noconn (does not allow connections)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^lat +\S+ \S+ +LATIN1 +1 +2 `).MatchString(r.stdout) {
		t.Errorf("list does not show database lat with its table and rows:\n%s", r.stdout)
	}
	if r = mustPgsprint(t, "restore", "-f", file, "--database", "lat", "--to-sql"); !strings.Contains(r.stdout, "caf\xe9") { // LATIN1 bytes, as COPY ... ENCODING 'LATIN1' says
		t.Errorf("--to-sql --database lat lacks its rows:\n%s", r.stdout)
	}

	// A user who cannot read pg_authid dumps the roles without their
	// passwords, and is told so.
	bobConn := strings.Replace(src.ConnString("postgres"), "user=postgres", "user=bob", 1)
	nopw := filepath.Join(dir, "nopw.pgs")
	r = mustPgsprint(t, "dump", "--all", "-d", bobConn, "-f", nopw, "--exclude-database", "app", "--exclude-database", "lat", "--exclude-database", "postgres")
	if !strings.Contains(r.stderr, "cannot read pg_authid: roles are dumped without their passwords") {
		t.Errorf("no warning about passwords:\n%s", r.stderr)
	}
	if r = mustPgsprint(t, "list", nopw); !strings.Contains(r.stdout, "passwords:  not dumped") || !strings.Contains(r.stdout, "skipme") {
		t.Errorf("list of a dump without passwords:\n%s", r.stdout)
	}

	// clone --all into a fresh server says which roles it kept, and how
	// they differ.
	t.Run("clone", func(t *testing.T) {
		cl := pgtest.New(t)
		// A role the target has with other attributes is kept, and said so.
		if err := cl.Exec(context.Background(), "postgres", "CREATE ROLE bob NOLOGIN"); err != nil {
			t.Fatal(err)
		}
		r := mustPgsprint(t, "clone", "--all", "--source", src.ConnString("postgres"), "--target", cl.ConnString("postgres"), "-j", "2",
			"--chunk-size", "256kB", "--exclude-database", "skip*", "--no-tablespaces")
		t.Log(r.stderr)
		if !strings.Contains(r.stderr, "kept as they are on the target: role bob, postgres; attributes not changed: bob: LOGIN in the archive, NOLOGIN on the target") {
			t.Errorf("clone --all does not report the role whose attributes differ:\n%s", r.stderr)
		}
		r = pgsprint(t, nil, "clone", "--all", "--source", src.ConnString("postgres"), "--target", src.ConnString("app"))
		if r.code != 2 || !strings.Contains(r.stderr, "same server") {
			t.Errorf("clone --all into its own source: exit %d, want 2:\n%s", r.code, r.stderr)
		}
	})

	// restore --to-sql --all, loaded by psql alone into a fresh server
	// (tablespaces left out: the directory is the running source's).
	t.Run("to-sql", func(t *testing.T) {
		sq := pgtest.New(t)
		script := filepath.Join(t.TempDir(), "server.sql")
		r := mustPgsprint(t, "restore", "--all", "-f", file, "--to-sql", "--no-tablespaces")
		if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-o", os.DevNull, "-d", sq.ConnString("postgres"), "-f", script).CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v\n%s", err, out)
		}
		if want := `role "postgres" already exists`; !strings.Contains(string(out), want) || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("psql said more than %q:\n%s", want, out)
		}
		noSpace := func(g string) string { return withoutLines(pgtest.WithoutRole(g, "postgres"), "TABLESPACE") }
		if got := pgtest.GlobalsDump(t, bin, sq.ConnString("postgres")); noSpace(got) != noSpace(wantGlobals) {
			t.Errorf("globals differ:\n%s", compare.SchemaDiff(noSpace(wantGlobals), noSpace(got)))
		}
		for _, db := range pgtest.ServerDatabases {
			if d := compare.FingerprintDiff(wantData[db], pgtest.Fingerprint(t, sq.ConnString(db))); len(d) > 0 {
				t.Errorf("database %s: data differs:\n%s", db, strings.Join(d, "\n"))
			}
		}
		for _, db := range pgtest.ServerDatabases {
			want := pgtest.SchemaDump(t, bin, src.ConnString(db), "--create", "--no-tablespaces")
			if d := compare.SchemaDiff(want, pgtest.SchemaDump(t, bin, sq.ConnString(db), "--create", "--no-tablespaces")); d != "" {
				t.Errorf("database %s: schemas differ:\n%s", db, d)
			}
		}
	})

	// The source stops and its tablespace directory is emptied, so that
	// the target, on the same host, can have the tablespace where it was.
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	pgtest.EmptyDir(t, ts)
	dst := pgtest.New(t)
	r = mustPgsprint(t, "restore", "--all", "-f", file, "-d", dst.ConnString("postgres"), "-j", "2")
	if !strings.Contains(r.stderr, "kept as they are on the target: role postgres") {
		t.Errorf("restore --all does not report the role the target had:\n%s", r.stderr)
	}

	// Bad inputs, each one line and exit 1.
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"databases exist", []string{"restore", "--all", "-f", file, "-d", dst.ConnString("postgres")}, `already has a database "app"`},
		{"one-database restore", []string{"restore", "-f", file, "-d", dst.ConnString("postgres")}, "holds a whole server (dump --all)"},
		{"list without --database", []string{"restore", "-f", file, "-l"}, "give --database NAME to list or script one of its databases (app, lat, postgres)"},
		{"no such database", []string{"restore", "-f", file, "--database", "nosuch", "-d", dst.ConnString("postgres")}, `no database "nosuch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, nil, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("exit %d, want 1 and one line with %q:\n%s", r.code, tc.want, r.stderr)
			}
		})
	}

	// One database out of the server archive, recreated under its own
	// name: the flags reach Restore.
	mustPgsprint(t, "restore", "-f", file, "--database", "lat", "--create", "--clean", "-d", dst.ConnString("postgres"))
	if d := compare.FingerprintDiff(wantData["lat"], pgtest.Fingerprint(t, dst.ConnString("lat"))); len(d) > 0 {
		t.Errorf("--database lat --create --clean: data differs:\n%s", strings.Join(d, "\n"))
	}

	// Killed with SIGKILL once the globals are in, at a random point of
	// the databases' restores (and the resumed run too, once), then
	// finished with --resume: every row exactly once, no journal left.
	t.Run("resume", func(t *testing.T) {
		pg2 := pgtest.New(t)
		_, rng := pgtest.Seeded(t, "", 1)
		conn, err := pgx.Connect(context.Background(), pg2.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		// The tablespace's directory is the other target's: refused in
		// one line naming it, before anything is created.
		r := pgsprint(t, nil, "restore", "--all", "-f", file, "-d", pg2.ConnString("postgres"))
		if r.code != 1 || !strings.Contains(r.stderr, `tablespace "space1": its directory `+ts+` cannot be used on the target server`) ||
			!strings.Contains(r.stderr, "--no-tablespaces") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("exit %d, want 1 and one line naming the tablespace's directory:\n%s", r.code, r.stderr)
		}
		var left int
		if err := conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM pg_roles WHERE rolname IN ('alice', 'bob', 'readers', 'pgsprint_restore_journal'))
			+ (SELECT count(*) FROM pg_tablespace WHERE spcname = 'space1')`).Scan(&left); err != nil || left != 0 {
			t.Errorf("the refused restore left %d roles or tablespaces behind (%v)", left, err)
		}
		args := []string{"restore", "--all", "-f", file, "-d", pg2.ConnString("postgres"), "-j", "2", "--no-tablespaces"}
		killed, done := 0, false
		for i := 0; i < 2 && !done; i++ {
			run := args
			if i > 0 {
				run = append(run, "--resume")
			}
			cmd, exited := startUntilGlobals(t, conn, run...)
			select {
			case <-exited:
				t.Logf("run %d finished before the kill", i)
			case <-time.After(time.Duration(rng.Int64N(int64(time.Second)))):
				cmd.Process.Kill()
				<-exited
				killed++
			}
			done = cmd.ProcessState.Success()
		}
		t.Logf("killed %d times", killed)
		if !done {
			r := mustPgsprint(t, append(args, "--resume")...)
			t.Log(r.stderr)
		}
		if markerRole(conn) {
			t.Error("the whole-server journal outlived the completed restore")
		}
		for _, db := range pgtest.ServerDatabases {
			if d := compare.FingerprintDiff(wantData[db], pgtest.Fingerprint(t, pg2.ConnString(db))); len(d) > 0 {
				t.Errorf("database %s: data differs after resume:\n%s", db, strings.Join(d, "\n"))
			}
			c, err := pgx.Connect(context.Background(), pg2.ConnString(db))
			if err != nil {
				t.Fatal(err)
			}
			requireNoJournal(t, c)
			c.Close(context.Background())
		}
	})
}

// startUntilGlobals starts pgsprint with args (a whole-server restore or
// clone) and returns once its globals are in on the target (markerRole
// over conn), with a channel closed when it exits; it fails the test if
// the run ends first.
func startUntilGlobals(t *testing.T, conn *pgx.Conn, args ...string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd, stderr := startPgsprint(t, args...)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for !markerRole(conn) {
		select {
		case <-exited:
			t.Fatalf("%s ended before its globals were in: %s", args[0], stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return cmd, exited
}

// markerRole says whether the whole-server restore's journal (a role) exists.
func markerRole(conn *pgx.Conn) bool {
	var ok bool
	err := conn.QueryRow(context.Background(), "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgsprint_restore_journal')").Scan(&ok)
	return err == nil && ok
}

// withoutLines leaves the lines containing word out.
func withoutLines(s, word string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, word) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
