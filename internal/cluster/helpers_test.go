package cluster

// Helpers shared by this package's tests that run whole-server dumps,
// restores and clones (Dump, Restore, Clone) against real servers, as
// `pgsprint dump --all`, `restore --all` and `clone --all` call them.

import (
	"os"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dumpAll dumps the server conn reaches into file as `pgsprint dump --all
// -j jobs --exclude-database exclude...` does (zstd:1, chunks of
// chunk.DefaultSize).
func dumpAll(t testing.TB, conn, file string, jobs int, exclude ...string) *DumpResult {
	t.Helper()
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Dump(pgtest.Context(t), DumpOptions{Options: dump.Options{
		Source: pgtest.Config(t, conn), File: file, Jobs: jobs, Codec: c, Version: "test",
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
	ctx := pgtest.Context(t)
	f, err := archivetest.OpenLocation(t, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := restore.Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: jobs}
	if _, err := Restore(ctx, RestoreOptions{Options: opts, Source: f.Source}); err != nil {
		t.Fatalf("restore --all: %v", err)
	}
}

// cloneAll clones the server src reaches into the one dst reaches as
// `pgsprint clone --all -j jobs` does, with --clean when clean.
func cloneAll(t testing.TB, src, dst string, jobs int, clean bool) {
	t.Helper()
	opts := clone.Options{
		Options: restore.Options{Target: pgtest.Config(t, dst), Jobs: jobs, Clean: clean},
		Session: dump.SessionOptions{Source: pgtest.Config(t, src), Version: "test",
			Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}},
	}
	if _, err := Clone(pgtest.Context(t), CloneOptions{Options: opts}); err != nil {
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
