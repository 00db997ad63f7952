package clone

// Helpers of this package's tests that run a whole dump, restore or clone
// against real servers as the binary calls them (dump.Run, restore.Run,
// Run), and watch them from the server's side.

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// testContext is a test's context: cancelled when it ends, and after
// five minutes, as a run of the binary would be.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	return dump.Options{Source: connConfig(t, conn), File: file, Jobs: jobs, Codec: c, Split: split(chunkSize), Version: "test"}
}

// restoreOptions are the options of `pgsprint restore -d conn -j jobs`.
func restoreOptions(t testing.TB, conn string, jobs int) restore.Options {
	t.Helper()
	return restore.Options{Target: connConfig(t, conn), Jobs: jobs, Programs: &pgbin.Finder{}}
}

// cloneOptions are the options of `pgsprint clone --source src --target
// dst -j jobs --chunk-size chunkSize` (0: the default).
func cloneOptions(t testing.TB, src, dst string, jobs int, chunkSize int64) Options {
	t.Helper()
	return Options{
		Options: restoreOptions(t, dst, jobs),
		Session: dump.SessionOptions{Source: connConfig(t, src), Split: split(chunkSize), Version: "test"},
	}
}

// restoreFile restores the archive file with opts, as `pgsprint restore
// -f file`, and returns the run's error.
func restoreFile(ctx context.Context, t testing.TB, file string, opts restore.Options) error {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ar, err := archive.Open(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	_, err = restore.Run(ctx, ar, opts)
	return err
}
