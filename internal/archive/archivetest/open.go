package archivetest

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// OpenFile opens the archive file at path for reading, as `pgsprint
// restore -f path` does, and closes the file when the test ends. A file
// that cannot be opened fails the test; archive.Open's own error (not an
// archive, incomplete, damaged) is returned for the test to judge.
func OpenFile(t testing.TB, path string) (*archive.Reader, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return archive.Open(f, st.Size())
}

// OpenLocation opens the archive at where (a path, an s3:// or https://
// address, or "-" for in) through archive.OpenLocation, for a parallel
// restore with a spill directory of the test's own, as `pgsprint restore
// -f where` does, and closes it when the test ends. An address that does
// not parse fails the test; OpenLocation's own error is returned.
func OpenLocation(t testing.TB, where string, in io.Reader) (*archive.Opened, error) {
	t.Helper()
	b, err := location.Parse(where, location.Options{In: in})
	if err != nil {
		t.Fatal(err)
	}
	f, err := archive.OpenLocation(context.Background(), b, archive.OpenOptions{Access: archive.Parallel, SpillDir: t.TempDir()})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { f.Close() })
	return f, nil
}
