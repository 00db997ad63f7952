package archive

import (
	"bytes"
	"fmt"
)

// BlockWriter turns the dump pipeline's many small writes (COPY delivers
// one row per Write) into blocks of about a fixed size, cut only between
// Writes so that data frames end on row boundaries. It keeps one buffer of
// at most MaxBlockSize, reused for every block.
type BlockWriter struct {
	s        *StreamWriter
	size     int
	buf      []byte
	bufRows  int64
	rows     int64
	countRow bool
	closed   bool
	err      error
}

// NewBlockWriter buffers Writes to s and writes a block whenever the buffer
// reaches size bytes (DefaultBlockSize if size <= 0, at most MaxBlockSize).
// Each Write must be one or more whole rows ending in '\n'; rows are
// counted by '\n' for data streams. For schema and large-object streams it
// simply blocks up bytes and counts no rows.
//
// A single Write that would push a block past MaxBlockSize (a row larger
// than that) is split across frames; such a row is the only case where a
// data frame does not end on a row boundary.
func NewBlockWriter(s *StreamWriter, size int) *BlockWriter {
	if size <= 0 {
		size = DefaultBlockSize
	}
	if size > MaxBlockSize {
		size = MaxBlockSize
	}
	return &BlockWriter{
		s:        s,
		size:     size,
		buf:      make([]byte, 0, size),
		countRow: s.kind == KindData,
	}
}

// Write buffers p and writes a block once the buffer holds size bytes.
func (b *BlockWriter) Write(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.closed {
		return 0, fmt.Errorf("archive: stream %d: write after close", b.s.id)
	}
	var rows int64
	if b.countRow {
		rows = int64(bytes.Count(p, []byte{'\n'}))
	}
	if len(b.buf)+len(p) > MaxBlockSize {
		if err := b.flush(); err != nil {
			return 0, err
		}
		if len(p) > MaxBlockSize {
			if err := b.writeHuge(p, rows); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	b.buf = append(b.buf, p...)
	b.bufRows += rows
	b.rows += rows
	if len(b.buf) >= b.size {
		if err := b.flush(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeHuge writes a Write too large for one frame straight from p, in
// MaxBlockSize pieces, without copying it into the buffer. Its rows are
// credited to the last piece.
func (b *BlockWriter) writeHuge(p []byte, rows int64) error {
	for len(p) > 0 {
		n := min(len(p), MaxBlockSize)
		var r int64
		if n == len(p) {
			r = rows
		}
		if err := b.s.WriteBlock(p[:n], r); err != nil {
			b.err = err
			return err
		}
		p = p[n:]
	}
	b.rows += rows
	return nil
}

func (b *BlockWriter) flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	if err := b.s.WriteBlock(b.buf, b.bufRows); err != nil {
		b.err = err
		return err
	}
	b.buf = b.buf[:0]
	b.bufRows = 0
	return nil
}

// Close writes what is buffered and closes the stream. Closing again is a
// no-op.
func (b *BlockWriter) Close() error {
	if b.err != nil {
		return b.err
	}
	if b.closed {
		return nil
	}
	if err := b.flush(); err != nil {
		return err
	}
	if err := b.s.Close(); err != nil {
		b.err = err
		return err
	}
	b.buf = nil
	b.closed = true
	return nil
}

// Rows is the number of rows written so far.
func (b *BlockWriter) Rows() int64 { return b.rows }
