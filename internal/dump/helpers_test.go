package dump

// Helpers of this package's tests that dump a real database through Run,
// as `pgsprint dump` calls it, and restore the archive to check it.

import (
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/pgtest"

	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// dumpOptions are the options `pgsprint dump -d conn -f file -j jobs -Z
// z` runs with (chunks of chunk.DefaultSize, split as auto says).
func dumpOptions(t *testing.T, conn, file string, jobs int, z string) Options {
	t.Helper()
	c, err := codec.Parse(z)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Source: mustConfig(t, conn), File: file, Jobs: jobs, Codec: c,
		Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}, Version: "test",
	}
}

// restoreFile restores the archive file into the database at conn with
// jobs loaders, as `pgsprint restore -f file -d conn -j jobs`.
func restoreFile(t *testing.T, file, conn string, jobs int) {
	t.Helper()
	ar, err := archivetest.OpenFile(t, file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restore.Run(pgtest.Context(t), ar, restore.Options{Target: mustConfig(t, conn), Jobs: jobs}); err != nil {
		t.Fatalf("restore %s: %v", file, err)
	}
}
