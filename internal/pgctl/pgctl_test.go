package pgctl_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgctl"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestQuoteConnValue checks libpq keyword/value quoting: bare where libpq
// allows it, quoted and backslash-escaped otherwise.
func TestQuoteConnValue(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "plain",
		"":             "''",
		"with space":   "'with space'",
		`db "q" ü`:     `'db "q" ü'`,
		`it's`:         `'it\'s'`,
		`back\slash`:   `'back\\slash'`,
		"/tmp/pgtest-": "/tmp/pgtest-",
	} {
		if got := pgctl.QuoteConnValue(in); got != want {
			t.Errorf("QuoteConnValue(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestKeywordConnString checks the stable order (host, port, user, dbname,
// then alphabetical) and per-value quoting.
func TestKeywordConnString(t *testing.T) {
	got := pgctl.KeywordConnString(map[string]string{
		"sslmode": "disable", "dbname": "my db", "user": "u", "port": "5432", "host": "/tmp/s", "application_name": "x",
	})
	want := "host=/tmp/s port=5432 user=u dbname='my db' application_name=x sslmode=disable"
	if got != want {
		t.Errorf("KeywordConnString = %s, want %s", got, want)
	}
}

// TestStartRejectsBadSetting checks that a setting name that could inject
// further configuration lines is refused before anything is created.
func TestStartRejectsBadSetting(t *testing.T) {
	pgtest.RequireBinaries(t)
	_, err := pgctl.Start(context.Background(), pgctl.Options{Settings: map[string]string{"port = 1\nfsync": "on"}})
	if err == nil || !strings.Contains(err.Error(), "invalid setting name") {
		t.Fatalf("Start with a bad setting name: err = %v", err)
	}
}

// TestStartClose starts a cluster the way `pgsprint demo` does, uses it,
// and checks that Close stops the server and removes every file.
func TestStartClose(t *testing.T) {
	pgtest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgctl.Start(ctx, pgctl.Options{Settings: map[string]string{"application_name": "cluster test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateDB(ctx, `odd "name"`); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, `odd "name"`, "CREATE TABLE t (i int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "postgres", "SELECT no_such_column"); err == nil {
		t.Fatal("Exec of a failing statement returned nil")
	}
	root := filepath.Dir(c.SocketDir())
	if _, err := os.Stat(filepath.Join(root, "data", "PG_VERSION")); err != nil {
		t.Fatalf("no data directory under %s: %v", root, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close, %s: err = %v, want it gone", root, err)
	}
	if err := c.Exec(ctx, "postgres", "SELECT 1"); err == nil {
		t.Error("the server still accepts connections after Close")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestBinDirForMissing checks that asking for a version that is not
// installed fails with ErrNoBinaries and names the version.
func TestBinDirForMissing(t *testing.T) {
	_, err := pgctl.BinDirFor(7)
	if !errors.Is(err, pgctl.ErrNoBinaries) || !strings.Contains(err.Error(), "PostgreSQL 7 is not installed") {
		t.Fatalf("BinDirFor(7) error = %v", err)
	}
}

// TestTemplate makes a template data directory, checks that a second
// InitTemplate to the same place fails with fs.ErrExist (the race two test
// processes may run), and starts two clusters copied from it: each its own
// server on its own port, with the superuser's TCP password, and what one
// creates absent from the other and from the template.
func TestTemplate(t *testing.T) {
	pgtest.RequireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "template")
	if err := pgctl.InitTemplate(ctx, "", dir); err != nil {
		t.Fatal(err)
	}
	if err := pgctl.InitTemplate(ctx, "", dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second InitTemplate into %s: err = %v, want fs.ErrExist", dir, err)
	}
	var cs [2]*pgctl.Instance
	for i := range cs {
		c, err := pgctl.Start(ctx, pgctl.Options{Template: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs[i] = c
	}
	if cs[0].Port() == cs[1].Port() || cs[0].Version() == 0 || cs[0].Version() != cs[1].Version() {
		t.Fatalf("ports %d and %d, versions %d and %d", cs[0].Port(), cs[1].Port(), cs[0].Version(), cs[1].Version())
	}
	if err := cs[0].CreateDB(ctx, "only_here"); err != nil {
		t.Fatal(err)
	}
	if err := cs[1].Exec(ctx, "only_here", "SELECT 1"); err == nil {
		t.Error("a database created in one copy of the template exists in the other")
	}
	conn, err := pgx.Connect(ctx, cs[1].TCPConnString("postgres", pgctl.SuperuserName)+" password="+pgctl.SuperuserPassword)
	if err != nil {
		t.Fatalf("TCP login with the superuser's password: %v", err)
	}
	conn.Close(ctx)
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the template holds a postmaster.pid: err = %v", err)
	}
}
