package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestBadInput checks that every kind of bad input ends with one clear
// error line, a non-zero exit code that says what kind of failure it was,
// and no archive left behind that could pass for a complete one.
func TestBadInput(t *testing.T) {
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

	out := filepath.Join(dir, "out.pgs")
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		errSub string
	}{
		{"missing database", nil, []string{"dump", "-d", c.ConnString("nosuchdb"), "-f", out}, exitConnection, `database "nosuchdb" does not exist`},
		{"wrong password", append([]string{"PGPASSWORD=wrong-pw"}, noPassfile...), []string{"dump", "-d", c.TCPConnString("small", "app"), "-f", out}, exitConnection, "password authentication failed"},
		{"unknown codec", nil, []string{"dump", "-d", c.ConnString("small"), "-f", out, "-Z", "brotli"}, exitUsage, "unknown compression method"},
		{"unknown flag", nil, []string{"dump", "--frobnicate"}, exitUsage, "unknown flag"},
		{"unwritable directory", nil, []string{"dump", "-d", c.ConnString("small"), "-f", filepath.Join(dir, "no", "such", "dir.pgs")}, exitFailure, "create archive"},
		{"truncated archive", nil, []string{"restore", "-f", truncated, "-d", c.ConnString("postgres")}, exitFailure, "incomplete"},
		{"flipped byte", nil, []string{"restore", "-f", flipped, "-d", c.ConnString("postgres")}, exitFailure, "corrupted archive"},
		{"missing archive", nil, []string{"restore", "-f", filepath.Join(dir, "nope.pgs"), "-d", c.ConnString("postgres")}, exitFailure, "no such file"},
		{"non-empty target", nil, []string{"restore", "-f", good, "-d", c.ConnString("busy")}, exitFailure, "not empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "pgsprint: error: ") {
				t.Errorf("want exactly one error line, got:\n%s", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.errSub) {
				t.Errorf("error does not mention %q:\n%s", tc.errSub, r.stderr)
			}
			if strings.Contains(r.stderr, "wrong-pw") || strings.Contains(r.stderr, "right-pw") {
				t.Errorf("error output reveals a password:\n%s", r.stderr)
			}
			noPartialFiles(t, dir, "good.pgs", "truncated.pgs", "flipped.pgs")
		})
	}

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

// TestRestoreAsNonOwner restores, as a role that owns none of the
// archive's objects, without -O: the restore stops with one line that
// names the failing statement and suggests -O and -x, with no program
// prefix printed twice; with -O -x it succeeds.
func TestRestoreAsNonOwner(t *testing.T) {
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
}
