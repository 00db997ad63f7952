package archive

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// ExtractSchema writes the archive's schema stream (pg_dump's custom
// format) to a private temp file and returns its path: pg_restore needs a
// seekable file. The caller removes it.
func ExtractSchema(src Source) (string, error) {
	f, err := tempfile.Create("", tempfile.Schema)
	if err != nil {
		return "", fmt.Errorf("extract schema: %w", err)
	}
	s := src.OpenStream(src.Manifest().SchemaStream)
	defer s.Close()
	_, err = io.Copy(f, s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIncomplete) {
			// The archive's own error names the stream and frame; read
			// from a pipe it may be another stream's, met on the way.
			return "", err
		}
		return "", fmt.Errorf("extract schema: %w", err)
	}
	return f.Name(), nil
}
