package cluster

// Helpers shared by this package's tests that run whole-server dumps,
// restores and clones (Dump, Restore, Clone) against real servers, as
// `pgsprint dump --all`, `restore --all` and `clone --all` call them.

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testContext is a test's context: cancelled when it ends, and after
// ten minutes.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// connConfig parses conn.
func connConfig(t testing.TB, conn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// dumpAll dumps the server conn reaches into file as `pgsprint dump --all
// -j jobs --exclude-database exclude...` does (zstd:1, chunks of
// chunk.DefaultSize).
func dumpAll(t testing.TB, conn, file string, jobs int, exclude ...string) *DumpResult {
	t.Helper()
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Dump(testContext(t), DumpOptions{Options: dump.Options{
		Source: connConfig(t, conn), File: file, Jobs: jobs, Codec: c, Version: "test",
		Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto},
	}, ExcludeDatabases: exclude})
	if err != nil {
		t.Fatalf("dump --all: %v", err)
	}
	return res
}

// restoreAll restores the whole-server archive file into the server conn
// reaches as `pgsprint restore --all -j jobs` does.
func restoreAll(t testing.TB, file, conn string, jobs int) {
	t.Helper()
	ctx := testContext(t)
	b, err := location.Parse(file, location.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Parallel, SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts := restore.Options{Target: connConfig(t, conn), Where: f.String(), Jobs: jobs}
	if _, err := Restore(ctx, RestoreOptions{Options: opts, Source: f.Source}); err != nil {
		t.Fatalf("restore --all: %v", err)
	}
}

// cloneAll clones the server src reaches into the one dst reaches as
// `pgsprint clone --all -j jobs` does, with --clean when clean.
func cloneAll(t testing.TB, src, dst string, jobs int, clean bool) {
	t.Helper()
	opts := clone.Options{
		Options: restore.Options{Target: connConfig(t, dst), Jobs: jobs, Clean: clean},
		Session: dump.SessionOptions{Source: connConfig(t, src), Version: "test",
			Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}},
	}
	if _, err := Clone(testContext(t), CloneOptions{Options: opts}); err != nil {
		t.Fatalf("clone --all: %v", err)
	}
}

// noTempFiles fails if the temporary directory dir (a run's TMPDIR)
// holds anything: every run removes its temporary files.
func noTempFiles(t testing.TB, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("unexpected file left in %s: %s", dir, e.Name())
	}
}

// versionsOrSkip returns the versions the cross-version tests use, skipping
// (or failing, under make test) when fewer than min are installed.
func versionsOrSkip(t *testing.T, min int) []int {
	t.Helper()
	vs := pgtest.Versions()
	if len(vs) < min {
		msg := fmt.Sprintf("need %d PostgreSQL major versions, have %v (scripts/install-pg-versions.sh installs more)", min, vs)
		if os.Getenv(pgtest.EnvRequire) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return vs
}

// userObjects describes every object anyone created in the database at
// conn (pg.UserObjects, the restore's own emptiness check, which sees the
// journal schema too), up to 20, e.g. "schema pgsprint_journal".
func userObjects(t testing.TB, conn string) []string {
	t.Helper()
	ctx := context.Background()
	cn, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	_, objs, err := pg.UserObjects(ctx, cn, 20)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
