package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestSerializableDeferrable: with --serializable-deferrable the dump's
// snapshot waits, as pg_dump's does, until a serializable read-write
// transaction that could make it anomalous ends (pg_stat_activity shows
// the leader waiting on SafeSnapshot), then the dump finishes in that
// snapshot, proven safe, taken before the writer committed; without the
// flag the same dump does not wait.
func TestSerializableDeferrable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "sd"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "sd", "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	writer, err := pgx.Connect(ctx, c.ConnString("sd"))
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(ctx)
	for _, sql := range []string{"BEGIN ISOLATION LEVEL SERIALIZABLE", "SELECT count(*) FROM t", "INSERT INTO t VALUES (2)"} {
		if _, err := writer.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	dir := t.TempDir()
	rows := func(file string) int64 {
		t.Helper()
		var l struct{ Tables []struct{ Rows int64 } }
		if err := json.Unmarshal([]byte(mustPgsprint(t, "list", "--json", file).stdout), &l); err != nil || len(l.Tables) != 1 {
			t.Fatalf("list %s: %v %+v", file, err, l)
		}
		return l.Tables[0].Rows
	}

	plain := filepath.Join(dir, "plain.pgs")
	mustPgsprint(t, "dump", "-q", "-d", c.ConnString("sd"), "-f", plain)
	if n := rows(plain); n != 1 {
		t.Errorf("a dump beside the open writer read %d rows, want 1", n)
	}

	safe := filepath.Join(dir, "safe.pgs")
	cmd, stderr := startPgsprint(t, "dump", "-q", "-d", c.ConnString("sd"), "-f", safe, "--serializable-deferrable")
	deadline := time.Now().Add(30 * time.Second)
	for pgtest.Scalar(t, c.ConnString("sd"), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgsprint' AND wait_event = 'SafeSnapshot'`) != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("the dump never waited for a safe snapshot: %s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := writer.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("dump --serializable-deferrable: exit %d\n%s", code, stderr)
	}
	if n := rows(safe); n != 1 {
		t.Errorf("the safe snapshot read %d rows, want 1 (it was taken before the writer committed)", n)
	}
}
