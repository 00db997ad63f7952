package archive

import (
	"bytes"
	"fmt"
	"time"

	"github.com/pgsprint/pgsprint/internal/codec"
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

	// obs is the archive's codec when its level follows the dump's
	// timings (codec.Observer) and this is a data stream; nil otherwise.
	obs   codec.Observer
	since time.Time // when the block being filled began to fill
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
//
// When the archive's codec is a codec.Observer (zstd auto, the dump's
// default), a data stream's BlockWriter tells it, for every frame it
// compresses, how long the block took to fill (the rows' wait on the
// server's COPY stream, from NewBlockWriter or the previous block's end)
// and how long compressing and appending it took: what the codec chooses
// the next frame's level from. Two clock readings a block; none a row.
func NewBlockWriter(s *StreamWriter, size int) *BlockWriter {
	if size <= 0 {
		size = DefaultBlockSize
	}
	if size > MaxBlockSize {
		size = MaxBlockSize
	}
	b := &BlockWriter{
		s:        s,
		size:     size,
		buf:      make([]byte, 0, size),
		countRow: s.kind == KindData,
	}
	if obs, ok := s.w.codec.(codec.Observer); ok && s.kind == KindData {
		b.obs, b.since = obs, time.Now()
	}
	return b
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
	var level int
	var start time.Time
	if b.obs != nil {
		level, start = b.obs.Next(), time.Now()
	}
	if err := b.s.WriteBlock(b.buf, b.bufRows); err != nil {
		b.err = err
		return err
	}
	if b.obs != nil {
		b.observe(level, start)
	}
	b.buf = b.buf[:0]
	b.bufRows = 0
	return nil
}

// observe tells the codec's Observer how long the block just written took
// to fill and to write (from start). A block that went into a pack (a
// small stream's) was not compressed yet: its timing says nothing of the
// encoder and is left out.
func (b *BlockWriter) observe(level int, start time.Time) {
	end := time.Now()
	if b.s.pack == nil {
		b.obs.Observe(level, start.Sub(b.since), end.Sub(start))
	}
	b.since = end
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
