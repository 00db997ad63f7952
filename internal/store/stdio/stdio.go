// Package stdio is standard input and output as an archive location:
// what -f - names. A dump writes the archive to standard output as it is
// made, and a restore reads it from standard input front to back, so the
// two can be joined by a pipe. Nothing written to a pipe can be taken
// back: a dump that fails never writes the archive's trailer, and every
// reader refuses an archive without one.
package stdio

import (
	"bufio"
	"context"
	"fmt"
	"io"

	"github.com/pgsprint/pgsprint/internal/store"
)

// writeBuffer batches the archive's writes into large pipe writes.
const writeBuffer = 1 << 20

// Backend is the pair of streams "-" stands for.
type Backend struct {
	in  io.Reader
	out io.Writer
}

// New returns the location that reads in and writes out (the process's
// standard input and output, or a test's pipe).
func New(in io.Reader, out io.Writer) *Backend { return &Backend{in: in, out: out} }

var _ store.Backend = (*Backend)(nil)

// String names the input: only reading errors name the location (a
// write fails as "write archive to standard output").
func (b *Backend) String() string { return "standard input" }

// Create starts writing to the output. There is nothing to refuse or
// replace: opts are ignored.
func (b *Backend) Create(ctx context.Context, _ store.CreateOptions) (store.Sink, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("write archive to standard output: %w", err)
	}
	if b.out == nil {
		return nil, fmt.Errorf("write archive to standard output: no output")
	}
	return &sink{buf: bufio.NewWriterSize(b.out, writeBuffer)}, nil
}

// Open returns the input, to be read front to back. It can be read
// once.
func (b *Backend) Open(ctx context.Context) (store.Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read archive from standard input: %w", err)
	}
	if b.in == nil {
		return nil, fmt.Errorf("read archive from standard input: no input")
	}
	return source{b.in}, nil
}

// source is the input; it cannot seek.
type source struct{ r io.Reader }

func (s source) Random() (io.ReaderAt, int64, bool) { return nil, 0, false }
func (s source) Sequential() io.Reader              { return s.r }
func (s source) Close() error                       { return nil }

// sink writes the archive to the output.
type sink struct {
	buf       *bufio.Writer
	committed bool
	aborted   bool
}

func (s *sink) Write(p []byte) (int, error) {
	if s.aborted {
		return 0, fmt.Errorf("write archive to standard output: write after abort")
	}
	n, err := s.buf.Write(p)
	if err != nil {
		return n, fmt.Errorf("write archive to standard output: %w", err)
	}
	return n, nil
}

// Commit flushes what is buffered. A cancelled ctx flushes nothing more,
// so the reader sees an archive without its end.
func (s *sink) Commit(ctx context.Context) error {
	if s.aborted {
		return fmt.Errorf("write archive to standard output: commit after abort")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write archive to standard output: %w", err)
	}
	if err := s.buf.Flush(); err != nil {
		return fmt.Errorf("write archive to standard output: %w", err)
	}
	s.committed = true
	return nil
}

// Abort drops what is buffered and writes nothing more: the trailer is
// missing, which marks the stream incomplete. After Commit it does
// nothing.
func (s *sink) Abort() {
	if s.committed {
		return
	}
	s.aborted = true
	s.buf.Reset(io.Discard)
}
