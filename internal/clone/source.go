package clone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// liveSource is an archive.Source whose streams are read live from the
// source database inside one dump.Session's snapshot: the schema stream is
// pg_dump --schema-only -Fc, a chunk's stream is COPY (chunk) TO STDOUT on
// a source connection, a large object's stream its bytes. So the restore
// engine, its scheduler and its checks run unchanged, and every byte comes
// from the one snapshot, as in a dump.
//
// A stream's totals (rows, bytes) are known once its COPY has finished,
// which is when its reader sees io.EOF: the restore checks the rows it
// loaded against them.
type liveSource struct {
	ctx    context.Context
	cancel context.CancelFunc
	sess   *dump.Session
	units  map[uint32]unit

	mu     sync.Mutex
	idle   []*dump.Reader // source connections in the snapshot, free
	all    []*dump.Reader
	opened map[uint32]bool
	skip   map[uint32]bool               // streams a resumed clone will not read (loaded before)
	info   map[uint32]archive.StreamInfo // by value: one allocation less a stream, 100,000 of them
	err    error                         // the first failure of a stream
	wg     sync.WaitGroup
}

// unit is what a stream id reads.
type unit struct {
	chunk *archive.Chunk
	lo    *archive.LargeObject
}

func newLiveSource(ctx context.Context, sess *dump.Session) *liveSource {
	ctx, cancel := context.WithCancel(ctx)
	s := &liveSource{ctx: ctx, cancel: cancel, sess: sess, units: map[uint32]unit{},
		opened: map[uint32]bool{}, skip: map[uint32]bool{}, info: map[uint32]archive.StreamInfo{}}
	m := sess.Manifest
	for i := range m.Chunks {
		s.units[m.Chunks[i].Stream] = unit{chunk: &m.Chunks[i]}
	}
	for i := range m.LargeObjects {
		s.units[m.LargeObjects[i].Stream] = unit{lo: &m.LargeObjects[i]}
	}
	return s
}

// Manifest returns the session's manifest.
func (s *liveSource) Manifest() *archive.Manifest { return s.sess.Manifest }

// Skip records that the restore will not read streams ids: an interrupted
// run of a resumed clone loaded them.
func (s *liveSource) Skip(ids ...uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.skip[id] = true
	}
}

// Stream returns a stream's totals once its source read has finished.
func (s *liveSource) Stream(id uint32) (*archive.StreamInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.info[id]
	if !ok {
		return nil, false
	}
	return &info, true
}

// Order is OnDemand: each stream is a COPY started when it is opened.
func (s *liveSource) Order() archive.Order { return archive.OnDemand }

// OpenStream starts reading stream id from the source and returns its
// bytes as they arrive. Each stream can be opened once.
func (s *liveSource) OpenStream(id uint32) io.ReadCloser {
	s.mu.Lock()
	twice := s.opened[id]
	s.opened[id] = true
	s.mu.Unlock()
	if twice {
		return errStream(fmt.Errorf("clone: stream %d opened twice", id))
	}
	p := newBlockPipe(s.ctx)
	if id == s.sess.Manifest.SchemaStream {
		s.start(id, p, func(ctx context.Context, w io.Writer) (int64, error) {
			return 0, s.sess.Schema(ctx, w)
		}, false)
		return p
	}
	u, ok := s.units[id]
	if !ok {
		return errStream(fmt.Errorf("clone: no stream %d", id))
	}
	s.start(id, p, func(ctx context.Context, w io.Writer) (int64, error) {
		conn, err := s.conn(ctx)
		if err != nil {
			return 0, err
		}
		n, err := s.read(ctx, conn, u, w)
		s.release(conn, err)
		return n, err
	}, true)
	return p
}

// start runs read in its own goroutine, records the stream's totals, then
// ends the pipe: the totals are in place before the reader can see EOF.
func (s *liveSource) start(id uint32, p *blockPipe, read func(context.Context, io.Writer) (int64, error), data bool) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		rows, err := read(s.ctx, p)
		s.mu.Lock()
		if err != nil && s.err == nil && !errors.Is(err, errReaderClosed) {
			s.err = err
		}
		if err == nil {
			s.info[id] = archive.StreamInfo{ID: id, Kind: kindOf(data), Rows: rows, RawBytes: p.written}
		}
		s.mu.Unlock()
		p.closeWrite(err)
	}()
}

func kindOf(data bool) archive.Kind {
	if data {
		return archive.KindData
	}
	return archive.KindSchema
}

// read copies one unit from the source into w.
func (s *liveSource) read(ctx context.Context, r *dump.Reader, u unit, w io.Writer) (int64, error) {
	m := s.sess.Manifest
	if u.lo != nil {
		if err := r.InSnapshot(ctx); err != nil {
			return 0, err
		}
		err := pg.ReadLargeObject(ctx, r.Conn(), u.lo.OID, pipeBlock, func(b []byte) error {
			_, err := w.Write(b)
			return err
		})
		return 0, err
	}
	t := m.Tables[u.chunk.Table]
	if err := r.Lock(ctx, t); err != nil {
		return 0, err
	}
	var mw *mask.Writer
	if mt := r.Mask(u.chunk.Table); mt != nil {
		mw = mt.Writer(w)
		w = mw
	}
	tag, err := r.CopyTo(ctx, w, t, *u.chunk, s.sess.Manifest.DataEncoding())
	if err == nil && mw != nil {
		err = mw.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("read table %s from the source: %w", pg.Qualified(t.Schema, t.Name), pg.ExplainLost(err))
	}
	return tag.RowsAffected(), nil
}

// conn returns an idle source connection in the snapshot, or opens one.
// At most as many are open as streams are read at once (the restore's
// connections).
func (s *liveSource) conn(ctx context.Context) (*dump.Reader, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return c, nil
	}
	s.mu.Unlock()
	c, err := s.sess.OpenReader(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.all = append(s.all, c)
	s.mu.Unlock()
	return c, nil
}

// release returns a connection to the pool, unless its COPY failed (pgx
// closes a connection whose COPY was interrupted), after releasing the
// lock of the table it read: an idle connection holds none, so another
// session's DDL on a table read never waits for the clone.
func (s *liveSource) release(c *dump.Reader, err error) {
	if err != nil || c.IsClosed() || c.Release(s.ctx) != nil {
		return
	}
	s.mu.Lock()
	s.idle = append(s.idle, c)
	s.mu.Unlock()
}

// Finish waits for every source read and ends the snapshot. It fails if
// any read failed, so a clone never reports success with a stream cut short.
func (s *liveSource) Finish() error {
	s.wg.Wait()
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for id := range s.units {
		s.mu.Lock()
		skipped := s.skip[id]
		s.mu.Unlock()
		if _, ok := s.Stream(id); !ok && !skipped {
			return fmt.Errorf("clone: stream %d was never read completely", id)
		}
	}
	return s.sess.Commit(s.ctx)
}

// failure is the first failure of a source read, if any.
func (s *liveSource) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// close stops every source read and closes the source connections.
func (s *liveSource) close() {
	s.cancel()
	s.wg.Wait()
	for _, c := range s.all {
		c.Close(s.ctx)
	}
}

// errStream is a stream that fails on first read.
func errStream(err error) io.ReadCloser { return &failed{err} }

type failed struct{ err error }

func (f *failed) Read([]byte) (int, error) { return 0, f.err }
func (f *failed) Close() error             { return nil }
