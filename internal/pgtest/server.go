package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// TablespaceDir returns a new empty directory the server can use as a
// tablespace's location (owned by the server's OS user), removed when the
// test ends.
func TablespaceDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgsprint-tablespace-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred, err := pgctl.ServerCredential(); err == nil && cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// EmptyDir removes everything inside dir (a tablespace location the
// stopped source used, for a target on the same host to use it again).
func EmptyDir(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// GlobalsDump is pg_dumpall --globals-only of the server behind connString,
// with binDir's pg_dumpall, without its comments and its per-run
// \restrict keys, so that two servers' globals compare equal when they
// hold the same roles, memberships, settings and tablespaces.
func GlobalsDump(t testing.TB, binDir, connString string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"--globals-only", "--no-password", "--dbname=" + connString}, extra...)
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "pg_dumpall"), args...)
	cmd.Env = pgctl.CleanEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dumpall --globals-only of %s: %v", redactConn(connString), err)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "--") || strings.HasPrefix(l, `\restrict`) || strings.HasPrefix(l, `\unrestrict`) || strings.TrimSpace(l) == "" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}
