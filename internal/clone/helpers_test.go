package clone

// Helpers of this package's tests that run a whole dump, restore or clone
// against real servers as the binary calls them (dump.Run, restore.Run,
// Run), carry a real database across servers the three ways a user does,
// and watch the runs from the server's side.

import (
	"context"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// dumpFile dumps the database at conn into file with two jobs, as
// `pgsprint dump -j 2` does by default (zstd:1, chunks of
// chunk.DefaultSize); pg_dump is the one the source's version needs.
func dumpFile(t testing.TB, conn, file string) {
	t.Helper()
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	opts := dump.Options{
		Source: pgtest.Config(t, conn), File: file, Jobs: 2, Codec: c,
		Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}, Version: "test",
	}
	if _, err := dump.Run(pgtest.Context(t), opts); err != nil {
		t.Fatalf("dump %s: %v", file, err)
	}
}

// restoreFile restores archive file into the database at conn with two
// jobs, as `pgsprint restore -j 2 -f file -d conn`; pg_restore is the one
// the target's version needs.
func restoreFile(t testing.TB, file, conn string) {
	t.Helper()
	ctx := pgtest.Context(t)
	f, err := archivetest.OpenLocation(t, file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restore.Run(ctx, f.Source, restore.Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: 2}); err != nil {
		t.Fatalf("restore %s: %v", file, err)
	}
}

// cloneDB clones the database at src into the one at dst with two jobs,
// as `pgsprint clone -j 2`.
func cloneDB(t testing.TB, src, dst string) {
	t.Helper()
	if _, err := Run(pgtest.Context(t), Options{Session: dump.SessionOptions{Source: pgtest.Config(t, src),
		Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}, Version: "test"},
		Options: restore.Options{Target: pgtest.Config(t, dst), Jobs: 2}}); err != nil {
		t.Fatalf("clone: %v", err)
	}
}

// split is how `--chunk-size size` cuts tables (0: the default size).
func split(size int64) chunk.Options {
	if size == 0 {
		size = chunk.DefaultSize
	}
	return chunk.Options{ChunkSize: size, Method: chunk.Auto}
}

// dumpOptions are the options of `pgsprint dump -d conn -f file -j jobs
// -Z z --chunk-size chunkSize` (0: the default).
func dumpOptions(t testing.TB, conn, file string, jobs int, z string, chunkSize int64) dump.Options {
	t.Helper()
	c, err := codec.Parse(z)
	if err != nil {
		t.Fatal(err)
	}
	return dump.Options{Source: pgtest.Config(t, conn), File: file, Jobs: jobs, Codec: c, Split: split(chunkSize), Version: "test"}
}

// restoreOptions are the options of `pgsprint restore -d conn -j jobs`.
func restoreOptions(t testing.TB, conn string, jobs int) restore.Options {
	t.Helper()
	return restore.Options{Target: pgtest.Config(t, conn), Jobs: jobs, Programs: &pgbin.Finder{}}
}

// cloneOptions are the options of `pgsprint clone --source src --target
// dst -j jobs --chunk-size chunkSize` (0: the default).
func cloneOptions(t testing.TB, src, dst string, jobs int, chunkSize int64) Options {
	t.Helper()
	return Options{
		Options: restoreOptions(t, dst, jobs),
		Session: dump.SessionOptions{Source: pgtest.Config(t, src), Split: split(chunkSize), Version: "test"},
	}
}

// restoreWith restores the archive file with opts, as `pgsprint restore
// -f file`, and returns the run's error.
func restoreWith(ctx context.Context, t testing.TB, file string, opts restore.Options) error {
	t.Helper()
	ar, err := archivetest.OpenFile(t, file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = restore.Run(ctx, ar, opts)
	return err
}
