package archive

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// SchemaFile is an archive's schema stream (pg_dump's custom format)
// where pg_restore can open and seek it: Path is what to hand it.
type SchemaFile struct {
	// Path is the file's name for pg_restore: a temporary file, or for
	// an encrypted archive /proc/PID/fd/N of a memfd, which no other
	// process's open and no kill leaves on disk.
	Path string
	// InMemory says the schema is in a memfd (never on disk).
	InMemory bool
	f        *os.File
}

// Remove closes and removes the file; the memory of a memfd is freed
// with its descriptor.
func (s *SchemaFile) Remove() {
	if s == nil {
		return
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if !s.InMemory && s.Path != "" {
		os.Remove(s.Path)
	}
	s.Path = ""
}

// ExtractSchema writes the archive's schema stream to a private file and
// returns it: pg_restore needs a seekable file. An encrypted archive's
// schema is decrypted into a memfd (memory, never on disk: a killed run
// leaves no plaintext behind) where the system has them, else into a
// temporary file removed at the end, as a clear archive's is. The caller
// calls Remove.
func ExtractSchema(src Source) (*SchemaFile, error) {
	s := &SchemaFile{}
	if Encrypted(src) {
		if f, path, err := memFile("pgsprint-schema"); err == nil {
			s.f, s.Path, s.InMemory = f, path, true
		}
	}
	if s.f == nil {
		f, err := tempfile.Create("", tempfile.Schema)
		if err != nil {
			return nil, fmt.Errorf("extract schema: %w", err)
		}
		s.f, s.Path = f, f.Name()
	}
	r := src.OpenStream(src.Manifest().SchemaStream)
	defer r.Close()
	_, err := io.Copy(s.f, r)
	if err == nil && !s.InMemory {
		// A memfd lives as long as its descriptor; a file by its name.
		err = s.f.Close()
		s.f = nil
	}
	if err != nil {
		s.Remove()
		if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrIncomplete) {
			// The archive's own error names the stream and frame; read
			// from a pipe it may be another stream's, met on the way.
			return nil, err
		}
		return nil, fmt.Errorf("extract schema: %w", err)
	}
	return s, nil
}

// Encrypted says whether src is an encrypted archive (opened with a
// key), looking through a whole-server archive's database view.
func Encrypted(src Source) bool {
	if d, ok := src.(*DatabaseSource); ok {
		src = d.Source
	}
	e, ok := src.(interface{ OpenedBy() string })
	return ok && e.OpenedBy() != ""
}
