package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestPreflightCatalogue pairs each failure of a catalogue (issue 42) with
// `pgsprint preflight` and with the real run, given the same flags, on a
// server of its own (roles, connection limits and settings are
// server-wide): whenever preflight says ready (exit 0), the run succeeds;
// whenever the run fails, preflight failed too, naming the cause (a
// keyword in its output). Each failure case must also make preflight
// fail, so that the catalogue tests what it says; the "at the limit"
// cases must make it pass, so that it is not merely strict.
func TestPreflightCatalogue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t, pgtest.Options{Settings: map[string]string{"max_connections": "30"}})
	exec := func(db, sql string) {
		t.Helper()
		if err := c.Exec(ctx, db, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("postgres", "CREATE ROLE app LOGIN CONNECTION LIMIT 3; CREATE ROLE app2 LOGIN PASSWORD 'right'")
	for _, db := range []string{"src", "toasty", "nocreate", "nopublic", "readonly", "dblimit OWNER app2 CONNECTION LIMIT 3"} {
		exec("postgres", "CREATE DATABASE "+db) // one statement each: not in a transaction
	}
	exec("postgres", "GRANT CREATE ON DATABASE nopublic TO app2")
	exec("src", `CREATE TABLE parent (id int PRIMARY KEY, name text NOT NULL);
		CREATE TABLE child (id int PRIMARY KEY, parent_id int NOT NULL REFERENCES parent, note text);
		INSERT INTO parent SELECT g, 'name ' || g FROM generate_series(1, 200) g;
		INSERT INTO child SELECT g, 1 + g % 200, md5(g::text) FROM generate_series(1, 2000) g;`)
	// A few heap pages, megabytes of TOAST: hex text stored as it is.
	exec("toasty", `CREATE TABLE docs (id int PRIMARY KEY, body text);
		ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
		INSERT INTO docs SELECT i, (SELECT string_agg(md5(i::text || g::text), '') FROM generate_series(1, 60000) g) FROM generate_series(1, 4) i;`)
	exec("nopublic", "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
	exec("readonly", "ALTER DATABASE readonly SET default_transaction_read_only = on")

	dir := t.TempDir()
	archive := filepath.Join(dir, "src.pgs")
	mustPgsprint(t, "dump", "-q", "-d", c.ConnString("src"), "-f", archive)
	as := func(db, user string) string {
		return pgtest.KeywordConnString(map[string]string{"host": c.SocketDir(), "port": strconv.Itoa(c.Port()), "user": user, "dbname": db})
	}
	n := 0
	fresh := func(owner string) string { // an empty target database of owner's
		n++
		name := "target_" + strconv.Itoa(n)
		exec("postgres", "CREATE DATABASE "+name+" OWNER "+owner)
		return name
	}
	full := filepath.Join(dir, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	mounted := false
	if out, err := exec_("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", full); err == nil {
		mounted = true
		t.Cleanup(func() { exec_("umount", full) })
	} else {
		t.Logf("mount a 2 MiB tmpfs: %v: %s", err, out)
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("a secret of the catalogue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	masked := func(rule string) []string {
		return []string{"dump", "-q", "-d", c.ConnString("src"), "-f", filepath.Join(dir, "masked.pgs"), "--overwrite", "--mask", rule, "--mask-secret-file", secret}
	}

	for _, tc := range []struct {
		name  string
		args  []string
		ready bool   // what preflight must say
		cause string // in preflight's output when it is not
		skip  string // why the case cannot run here ("" runs it)
	}{
		{"role at its connection limit", []string{"restore", "-q", "-O", "-x", "-f", archive, "-d", as(fresh("app"), "app"), "-j", "1"}, true, "", ""},
		{"role connection limit below -j", []string{"restore", "-q", "-O", "-x", "-f", archive, "-d", as(fresh("app"), "app"), "-j", "4"}, false, "CONNECTION LIMIT", ""},
		{"database connection limit below -j", []string{"restore", "-q", "-O", "-x", "-f", archive, "-d", as("dblimit", "app2"), "-j", "4"}, false, "CONNECTION LIMIT", ""},
		{"too few max_connections", []string{"restore", "-q", "-f", archive, "-d", c.ConnString(fresh("postgres")), "-j", "40"}, false, "max_connections", ""},
		{"no CREATE on the target database", []string{"restore", "-q", "-f", archive, "-d", as("nocreate", "app2")}, false, "CREATE", ""},
		{"no CREATE on public", []string{"restore", "-q", "-f", archive, "-d", as("nopublic", "app2")}, false, "CREATE ON SCHEMA", ""},
		{"clone with no CREATE on public", []string{"clone", "-q", "--source", c.ConnString("src"), "--target", as("nopublic", "app2")}, false, "CREATE ON SCHEMA", ""},
		{"read-only target", []string{"restore", "-q", "-f", archive, "-d", c.ConnString("readonly")}, false, "read-only", ""},
		{"missing database", []string{"restore", "-q", "-f", archive, "-d", c.ConnString("nosuch")}, false, "nosuch", ""},
		{"missing role", []string{"restore", "-q", "-f", archive, "-d", as(fresh("postgres"), "nosuch")}, false, "nosuch", ""},
		{"wrong credentials", []string{"restore", "-q", "-f", archive, "-d", c.TCPConnString(fresh("app2"), "app2") + " password=wrong"}, false, "password", ""},
		{"unknown subset table", []string{"clone", "-q", "--source", c.ConnString("src"), "--target", c.ConnString(fresh("postgres")), "--subset", "public.nosuch: true"}, false, "nosuch", ""},
		{"unknown subset column", []string{"clone", "-q", "--source", c.ConnString("src"), "--target", c.ConnString(fresh("postgres")), "--subset", "public.parent: nosuchcol > 1"}, false, "nosuchcol", ""},
		{"unknown mask column", masked("public.parent.nosuch=email"), false, "nosuch", ""},
		{"mask rule on a key", masked("public.parent.id=const:1"), false, "parent", ""},
		{"TOAST-heavy table on a small disk", []string{"dump", "-q", "-d", c.ConnString("toasty"), "-f", filepath.Join(full, "toasty.pgs")}, false, "disk space", map[bool]string{true: "", false: "no tmpfs could be mounted (not root?)"}[mounted]},
		{"missing extension on the target", nil, false, "extension", "one server holds every extension the source has: a target without one needs a second installation (issue 45 adds that check)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip != "" {
				t.Skip(tc.skip)
			}
			pre := pgsprint(t, nil, append([]string{"preflight"}, tc.args...)...)
			said := pre.stdout + pre.stderr
			t.Logf("preflight: exit %d\n%s", pre.code, said)
			if (pre.code == 0) != tc.ready {
				t.Errorf("preflight exit %d, want ready=%v", pre.code, tc.ready)
			}
			if pre.code != 0 && !strings.Contains(said, tc.cause) {
				t.Errorf("preflight does not name the cause (%q)", tc.cause)
			}
			run := pgsprint(t, nil, tc.args...)
			t.Logf("run: exit %d: %s", run.code, run.stderr)
			switch {
			case pre.code == 0 && run.code != 0:
				t.Errorf("preflight said ready, the run failed (exit %d): %s", run.code, run.stderr)
			case run.code != 0 && pre.code == 0:
				t.Errorf("the run failed but preflight passed")
			case run.code != 0 && pre.code != run.code && run.code != exitFailure:
				t.Errorf("preflight exit %d, the run's %d", pre.code, run.code)
			}
		})
	}
}

// exec_ runs a command, returning its combined output.
func exec_(name string, args ...string) (string, error) {
	b, err := exec.Command(name, args...).CombinedOutput()
	return string(b), err
}
