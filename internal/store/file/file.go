// Package file is the local file system as an archive location: what -f
// PATH names. An archive is written under a hidden temporary name beside
// its final one (internal/tempfile: the name carries the writer's pid, so
// a later run removes what a killed one left) and renamed into place on
// Commit, after an fsync of the file and then of the directory: a file
// with the final name is always a complete archive. A file is read with
// random access, so a restore reads its streams in parallel.
package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// writeBuffer is the write buffer in front of the file: large writes
// keep the number of system calls down while N workers feed one file.
const writeBuffer = 1 << 20

// Backend is the archive at one path.
type Backend struct {
	path string
}

// New returns the location path.
func New(path string) *Backend { return &Backend{path: path} }

var _ store.Backend = (*Backend)(nil)

// String is the path.
func (b *Backend) String() string { return b.path }

// Create starts writing the archive under a temporary name in the same
// directory (a rename across file systems is not atomic), mode 0600:
// archives hold all the data. An existing file at the path is replaced
// on Commit whatever opts.Overwrite says, as pg_dump replaces its -f file.
func (b *Backend) Create(ctx context.Context, _ store.CreateOptions) (store.Sink, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create archive %s: %w", b.path, err)
	}
	f, err := tempfile.Create(tempfile.Partial(b.path))
	if err != nil {
		// Name the archive's directory, not the temporary name in it.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("create archive %s: directory %s does not exist", b.path, filepath.Dir(b.path))
			}
			return nil, fmt.Errorf("create archive %s: in directory %s: %w", b.path, filepath.Dir(b.path), pe.Err)
		}
		return nil, fmt.Errorf("create archive %s: %w", b.path, err)
	}
	return &sink{f: f, buf: bufio.NewWriterSize(f, writeBuffer), final: b.path}, nil
}

// Open opens the file for random access. A missing file matches
// store.ErrNotFound, and its message is the system's ("no such file").
func (b *Backend) Open(ctx context.Context) (store.Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open archive %s: %w", b.path, err)
	}
	f, err := os.Open(b.path)
	if err != nil {
		// The path once, not "open archive: open PATH: ...".
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = notFound{err}
		}
		return nil, fmt.Errorf("open archive %s: %w", b.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open archive: %w", err)
	}
	if st.IsDir() {
		f.Close()
		if _, err := os.Stat(filepath.Join(b.path, "toc.dat")); err == nil {
			return nil, fmt.Errorf("open archive %s: not a pgsprint archive: it is a pg_dump directory-format archive (pg_dump -Fd, it holds toc.dat): restore it with pg_restore", b.path)
		}
		return nil, fmt.Errorf("open archive %s: is a directory: give the archive's file", b.path)
	}
	return &source{f: f, size: st.Size()}, nil
}

// notFound is the system's error for a missing file that also matches
// store.ErrNotFound.
type notFound struct{ error }

func (e notFound) Unwrap() error        { return e.error }
func (e notFound) Is(target error) bool { return target == store.ErrNotFound }

// source is an opened archive file; *os.File's ReadAt is safe for
// concurrent use.
type source struct {
	f    *os.File
	size int64
}

func (s *source) Random() (io.ReaderAt, int64, bool) { return s.f, s.size, true }
func (s *source) Sequential() io.Reader              { return io.NewSectionReader(s.f, 0, s.size) }
func (s *source) Close() error                       { return s.f.Close() }

// sink is an archive being written under its temporary name.
type sink struct {
	f     *os.File
	buf   *bufio.Writer
	final string
	done  bool // renamed into place
	gone  bool // closed and removed
}

func (s *sink) Write(p []byte) (int, error) {
	n, err := s.buf.Write(p)
	if err != nil {
		return n, fmt.Errorf("write archive %s: %w", s.final, err)
	}
	return n, nil
}

// Commit flushes, syncs and renames the file to its final name, then
// syncs the directory so that the rename survives a power loss.
func (s *sink) Commit(ctx context.Context) error {
	if s.done {
		return nil
	}
	if s.gone {
		return fmt.Errorf("write archive %s: commit after abort", s.final)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write archive %s: %w", s.final, err)
	}
	if err := s.buf.Flush(); err != nil {
		return fmt.Errorf("write archive %s: %w", s.final, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync archive %s: %w", s.final, err)
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close archive %s: %w", s.final, err)
	}
	if err := os.Rename(s.f.Name(), s.final); err != nil {
		os.Remove(s.f.Name())
		s.gone = true
		return fmt.Errorf("rename archive into place: %w", err)
	}
	s.done = true
	if d, err := os.Open(filepath.Dir(s.final)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Abort removes the temporary file unless Commit succeeded. Twin of the
// s3 sink's Abort in shape (a no-op after Commit or an earlier Abort):
// kept apart because that is store.Sink's contract, and what each undoes
// is its medium's own.
func (s *sink) Abort() {
	if s.done || s.gone {
		return
	}
	s.gone = true
	s.f.Close()
	os.Remove(s.f.Name())
}
