package restore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// splitLoad loads one large chunk on several connections at once: the
// stream is read once, cut at row boundaries, and each block goes to
// whichever connection is ready for it. Two server-side COPYs into one table
// are measurably faster than one even on two cores, because each spends
// much of its time parsing rows and forming tuples.
//
// Every part is a task of its own; the first to start reads the stream, the
// others join whenever a worker is free, so a part that starts after the
// stream has been read simply loads nothing. Each part commits on its own;
// the last to finish records the chunk in the journal. Only a chunk that is
// a whole table is split, so a resumed run can undo an interrupted split
// load by emptying the table.
type splitLoad struct {
	chunk *archive.Chunk
	parts int

	start  sync.Once
	blocks chan []byte
	mu     sync.Mutex
	err    error // set before blocks is closed when reading the stream failed

	rows atomic.Int64
	done atomic.Int32
}

func newSplitLoad(c *archive.Chunk, parts int) *splitLoad {
	return &splitLoad{chunk: c, parts: parts, blocks: make(chan []byte, 2*parts)}
}

// loadPart runs one part: the first also reads the stream.
func (r *loader) loadPart(ctx context.Context, conn *pgx.Conn, sl *splitLoad) (int64, error) {
	name := r.tableName(sl.chunk)
	copySQL := copyIn(r.m.Tables[sl.chunk.Table], sl.chunk, r.m.DataEncoding()).From()
	g, gctx := errgroup.WithContext(ctx)
	sl.start.Do(func() {
		g.Go(func() error { return sl.feed(gctx, r.ar.OpenStream(sl.chunk.Stream)) })
	})
	var n int64
	g.Go(func() error {
		tag, err := conn.PgConn().CopyFrom(gctx, &blockReader{ctx: gctx, sl: sl}, copySQL)
		n = tag.RowsAffected()
		return err
	})
	if err := g.Wait(); err != nil {
		if rerr := sl.readErr(); rerr != nil {
			err = rerr // the cause, which the server's COPY failure only quotes
		}
		return 0, fmt.Errorf("restore table %s (stream %d): %w", name, sl.chunk.Stream, err)
	}
	total := sl.rows.Add(n)
	if int(sl.done.Add(1)) == sl.parts {
		if err := r.checkRows(sl.chunk, total); err != nil {
			return 0, fmt.Errorf("restore table %s (stream %d): %w", name, sl.chunk.Stream, err)
		}
		// Every part has committed: the chunk is done. Until this row
		// commits, a resumed run empties the table and loads it again
		// (resetPartialTables), since parts commit one by one at
		// boundaries that depend on timing.
		if err := r.j.Record(ctx, conn, chunkStep(sl.chunk.Stream)); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// feed reads the stream and hands out row-aligned blocks.
func (sl *splitLoad) feed(ctx context.Context, s io.ReadCloser) error {
	defer s.Close()
	w := &rowCutter{ctx: ctx, out: sl.blocks}
	_, err := io.Copy(w, s)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		sl.mu.Lock()
		sl.err = err
		sl.mu.Unlock()
	}
	close(sl.blocks)
	return err
}

func (sl *splitLoad) readErr() error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.err
}

// rowCutter copies what is written to it into blocks that end at a row
// boundary (COPY text rows end in a newline; newlines inside values are
// escaped), so that any block may go to any connection.
type rowCutter struct {
	ctx     context.Context
	out     chan<- []byte
	partial []byte
}

func (w *rowCutter) Write(p []byte) (int, error) {
	i := bytes.LastIndexByte(p, '\n')
	if i < 0 {
		w.partial = append(w.partial, p...)
		return len(p), nil
	}
	block := make([]byte, 0, len(w.partial)+i+1)
	block = append(append(block, w.partial...), p[:i+1]...)
	w.partial = append(w.partial[:0], p[i+1:]...)
	if err := w.send(block); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *rowCutter) flush() error {
	if len(w.partial) == 0 {
		return nil
	}
	return w.send(w.partial)
}

func (w *rowCutter) send(b []byte) error {
	select {
	case w.out <- b:
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

// blockReader is one connection's view of a split stream.
type blockReader struct {
	ctx context.Context
	sl  *splitLoad
	cur []byte
}

func (b *blockReader) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		select {
		case blk, ok := <-b.sl.blocks:
			if !ok {
				if err := b.sl.readErr(); err != nil {
					return 0, err
				}
				return 0, io.EOF
			}
			b.cur = blk
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
	}
	n := copy(p, b.cur)
	b.cur = b.cur[n:]
	return n, nil
}
