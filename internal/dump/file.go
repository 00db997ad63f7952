package dump

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// output is where the archive bytes go: a file renamed into place on
// Commit, or a stream (stdout) that a reader knows complete only by its
// trailer.
type output interface {
	io.Writer
	Commit() error
	Abort()
}

// openOutput returns the archive destination: path "-" is w (stdout).
func openOutput(path string, w io.Writer) (output, error) {
	if path == "-" {
		return &streamOutput{buf: bufio.NewWriterSize(w, 1<<20)}, nil
	}
	return createAtomic(path)
}

// streamOutput writes the archive to a pipe. Nothing can be taken back
// from a pipe; a failed dump just never writes the trailer, so that every
// reader sees an incomplete archive.
type streamOutput struct {
	buf *bufio.Writer
}

func (s *streamOutput) Write(p []byte) (int, error) {
	n, err := s.buf.Write(p)
	if err != nil {
		return n, outputError{fmt.Errorf("write archive to standard output: %w", err)}
	}
	return n, nil
}

// outputError is a failure to write the archive, kept apart from a lost
// server connection (both can be a broken pipe).
type outputError struct{ error }

func (e outputError) Unwrap() error { return e.error }

// Commit flushes what is buffered.
func (s *streamOutput) Commit() error {
	if err := s.buf.Flush(); err != nil {
		return fmt.Errorf("write archive to standard output: %w", err)
	}
	return nil
}

// Abort flushes nothing more: the trailer is missing, which marks the
// stream incomplete.
func (s *streamOutput) Abort() {}

// atomicFile is an archive being written under a temporary name in the
// destination's directory; only Commit gives it the final name, so a file
// with that name is always complete.
type atomicFile struct {
	f     *os.File
	buf   *bufio.Writer
	final string
	done  bool
}

func createAtomic(path string) (*atomicFile, error) {
	// The file has mode 0600: archives hold all the data. Its name carries
	// this process's id, so that a run after a SIGKILL removes it.
	f, err := tempfile.Create(tempfile.Partial(path))
	if err != nil {
		return nil, fmt.Errorf("create archive %s: %w", path, err)
	}
	return &atomicFile{f: f, buf: bufio.NewWriterSize(f, 1<<20), final: path}, nil
}

func (a *atomicFile) Write(p []byte) (int, error) {
	n, err := a.buf.Write(p)
	if err != nil {
		return n, fmt.Errorf("write archive %s: %w", a.final, err)
	}
	return n, nil
}

// Commit flushes, syncs and renames the file to its final name.
func (a *atomicFile) Commit() error {
	if err := a.buf.Flush(); err != nil {
		return fmt.Errorf("write archive %s: %w", a.final, err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("sync archive %s: %w", a.final, err)
	}
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("close archive %s: %w", a.final, err)
	}
	if err := os.Rename(a.f.Name(), a.final); err != nil {
		return fmt.Errorf("rename archive into place: %w", err)
	}
	a.done = true
	if d, err := os.Open(filepath.Dir(a.final)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Abort removes the partial file unless Commit succeeded.
func (a *atomicFile) Abort() {
	if a.done {
		return
	}
	a.f.Close()
	os.Remove(a.f.Name())
}
