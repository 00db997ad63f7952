package archive

import (
	"fmt"
	"io"
	"os"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// spool copies the archive arriving on in into a file in dir (the temp
// directory when empty) and opens it, for readers that need to seek (the
// --to-sql script writes the streams in manifest order, not as they
// arrive). The file is unlinked at once: it takes disk space only while
// open, and nothing is left behind however the process ends. The Reader's
// Close closes it.
func spool(in io.Reader, dir string, ids ...age.Identity) (*Reader, error) {
	f, err := tempfile.Create(dir, tempfile.Stdin)
	if err != nil {
		return nil, fmt.Errorf("spool archive to disk: %w", err)
	}
	os.Remove(f.Name())
	n, err := io.Copy(f, in)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spool archive to disk: %w", err)
	}
	r, err := Open(f, n, ids...)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer = f
	return r, nil
}
