package dump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// unit is one piece of work for a data worker: a chunk, a batch of small
// tables' chunks or a batch of large objects.
type unit struct {
	chunk  *archive.Chunk
	tables []*archive.Chunk       // small whole tables, locked together (batchSmallTables)
	los    []*archive.LargeObject // a batch of large objects (copyLargeObjects)
	size   int64                  // for largest-first ordering
}

// smallTableBytes is the size under which a whole table is read in a
// batch with other small ones (batchSmallTables).
const smallTableBytes = 1 << 20

// loBatch is how many large objects a dump worker reads with one query
// (their first loHead bytes; the rest, if any, one by one): with one query
// each, 100,000 small ones cost 100,000 round trips.
const (
	loBatch = 256
	loHead  = 64 << 10
)

// planUnits orders the work largest first (chunks by their estimated
// size, large objects by theirs), so that the longest unit never starts
// last and leaves the other workers idle at the end.
func planUnits(m *archive.Manifest, sizes map[uint32]int64) []unit {
	var us []unit
	for i := range m.Chunks {
		c := &m.Chunks[i]
		us = append(us, unit{chunk: c, size: sizes[c.Stream]})
	}
	for i := 0; i < len(m.LargeObjects); i += loBatch {
		u := unit{}
		for j := i; j < min(i+loBatch, len(m.LargeObjects)); j++ {
			u.los = append(u.los, &m.LargeObjects[j])
			u.size += m.LargeObjects[j].Size
		}
		us = append(us, u)
	}
	chunk.LargestFirst(us, func(u unit) int64 { return u.size })
	return batchSmallTables(us)
}

// batchSmallTables groups runs of small whole-table chunks (under
// smallTableBytes, largest first puts them last) into units of up to
// MaxLockBatch, which a reader locks and checks in one round trip and
// reads in one transaction: with thousands of small tables, the lock's
// round trip and transaction were half of each table's cost.
func batchSmallTables(us []unit) []unit {
	out := us[:0:0]
	var cur unit
	flush := func() {
		switch len(cur.tables) {
		case 0:
		case 1:
			out = append(out, unit{chunk: cur.tables[0], size: cur.size})
		default:
			out = append(out, cur)
		}
		cur = unit{}
	}
	for _, u := range us {
		if u.chunk == nil || u.chunk.Where != "" || u.size >= smallTableBytes {
			flush()
			out = append(out, u)
			continue
		}
		cur.tables = append(cur.tables, u.chunk)
		cur.size += u.size
		if len(cur.tables) == MaxLockBatch {
			flush()
		}
	}
	flush()
	return out
}

// dumpUnit dumps one unit of m on the worker's reader, reporting to rep,
// and returns the rows copied. Its small streams (small tables, large
// objects) share packs (archive.Packer): a quarter of a block at most
// each, a block's worth in a pack.
func (k *worker) dumpUnit(ctx context.Context, rep progress.Reporter, m *archive.Manifest, u unit) (int64, error) {
	p := k.w.Packer(k.blockSize/4, k.blockSize)
	rows, err := dumpPacked(ctx, k.r, p, m, u, k.blockSize, rep)
	if err != nil {
		return rows, err
	}
	return rows, p.Close()
}

// dumpPacked is dumpUnit with the unit's Packer.
func dumpPacked(ctx context.Context, r *Reader, w *archive.Packer, m *archive.Manifest, u unit, blockSize int, rep progress.Reporter) (int64, error) {
	switch {
	case u.chunk != nil:
		if err := r.Lock(ctx, m.Tables[u.chunk.Table]); err != nil {
			return 0, err
		}
		return copyChunk(ctx, r, w, m, u.chunk, r.Mask(u.chunk.Table), blockSize, rep)
	case u.tables != nil:
		ts := make([]archive.Table, len(u.tables))
		for i, c := range u.tables {
			ts[i] = m.Tables[c.Table]
		}
		if err := r.LockAll(ctx, ts); err != nil {
			return 0, err
		}
		var rows int64
		for _, c := range u.tables {
			n, err := copyChunk(ctx, r, w, m, c, r.Mask(c.Table), blockSize, rep)
			rows += n
			if err != nil {
				return rows, err
			}
		}
		return rows, nil
	case u.los != nil:
		if err := r.InSnapshot(ctx); err != nil {
			return 0, err
		}
		return 0, copyLargeObjects(ctx, r.Conn(), w, u.los, blockSize, rep)
	}
	return 0, nil
}

// copyChunk writes chunk c's rows, masked through mt when it is not nil.
func copyChunk(ctx context.Context, r *Reader, w *archive.Packer, m *archive.Manifest, c *archive.Chunk, mt *mask.TableMask, blockSize int, rep progress.Reporter) (int64, error) {
	t := m.Tables[c.Table]
	name := pg.Qualified(t.Schema, t.Name)
	work := progress.Work{Kind: "data", Table: name, Name: name, Whole: c.Where == ""}
	rep.Start(work)
	began := time.Now()
	bw := archive.NewBlockWriter(w.Stream(archive.KindData, c.Stream), chunkBlockSize(c.Size, blockSize))
	counter := progress.NewWriter(bw, rep)
	var out io.Writer = counter
	var mw *mask.Writer
	if mt != nil {
		mw = mt.Writer(counter)
		out = mw
	}
	tag, err := r.CopyTo(ctx, out, t, *c, m.DataEncoding())
	if err == nil && mw != nil {
		err = mw.Close()
	}
	counter.Flush()
	if err != nil {
		if !errors.As(err, new(outputError)) {
			err = pg.ExplainLost(err)
		}
		return 0, fmt.Errorf("dump table %s: %w", name, err)
	}
	if err := bw.Close(); err != nil {
		return 0, fmt.Errorf("dump table %s: %w", name, err)
	}
	if got := bw.Rows(); got != tag.RowsAffected() {
		return 0, fmt.Errorf("dump table %s: server sent %d rows but %d were written", name, tag.RowsAffected(), got)
	}
	rep.Done(work, progress.Done{Bytes: counter.Total, Rows: tag.RowsAffected(), Elapsed: time.Since(began), Planned: c.Size})
	return tag.RowsAffected(), nil
}

// minBlockSize is the smallest block buffer a chunk gets (chunkBlockSize).
const minBlockSize = 64 << 10

// chunkBlockSize is the block size for a chunk of about estimate bytes (its
// relation's size in the snapshot): blockSize, or for a chunk much smaller
// than that, twice its estimate rounded up to minBlockSize. A block writer
// allocates its whole buffer up front, and a 1 MiB buffer per table made a
// dump of thousands of small tables spend most of its CPU clearing memory
// and collecting it. Text rows may take more room than on disk; a chunk
// that outgrows its buffer is written in several blocks, as a large one is.
func chunkBlockSize(estimate int64, blockSize int) int {
	if estimate >= int64(blockSize)/4 {
		return blockSize
	}
	size := (2*max(estimate, 1) + minBlockSize - 1) / minBlockSize * minBlockSize
	return int(min(size, int64(blockSize)))
}

// copyLargeObjects writes a batch of large objects, each to its own
// stream, one stream at a time (the archive's interleave stays one stream
// per worker): their heads come in one query, and what is left of a
// longer one is read in blockSize pieces after it.
func copyLargeObjects(ctx context.Context, conn *pgx.Conn, w *archive.Packer, los []*archive.LargeObject, blockSize int, rep progress.Reporter) error {
	oids := make([]uint32, len(los))
	byOID := make(map[uint32]*archive.LargeObject, len(los))
	for i, lo := range los {
		oids[i], byOID[lo.OID] = lo.OID, lo
	}
	type longer struct {
		lo   *archive.LargeObject
		head []byte
	}
	var rest []longer
	err := pg.ReadLargeObjectHeads(ctx, conn, oids, loHead, func(oid uint32, b []byte) error {
		lo := byOID[oid]
		if lo == nil {
			return fmt.Errorf("dump large objects: the server sent large object %d, which was not asked for", oid)
		}
		if len(b) == loHead {
			rest = append(rest, longer{lo, b})
			return nil
		}
		return writeLargeObject(ctx, conn, w, lo, b, blockSize, rep)
	})
	if err != nil {
		return err
	}
	for _, l := range rest {
		if err := writeLargeObject(ctx, conn, w, l.lo, l.head, blockSize, rep); err != nil {
			return err
		}
	}
	return nil
}

// writeLargeObject writes one large object's stream: head, its first
// bytes, then, if head is loHead long, the rest read from there.
func writeLargeObject(ctx context.Context, conn *pgx.Conn, w *archive.Packer, lo *archive.LargeObject, head []byte, blockSize int, rep progress.Reporter) error {
	work := progress.Work{Kind: "data", Table: "large objects", Name: fmt.Sprintf("large object %d", lo.OID)}
	rep.Start(work)
	began := time.Now()
	size := int64(len(head))
	s := w.Stream(archive.KindLargeObject, lo.Stream)
	if len(head) > 0 {
		rep.Add(int64(len(head)), 0)
		if err := s.WriteBlock(head, 0); err != nil {
			return fmt.Errorf("dump large object %d: %w", lo.OID, err)
		}
	}
	if len(head) == loHead {
		err := pg.ReadLargeObjectFrom(ctx, conn, lo.OID, loHead, blockSize, func(b []byte) error {
			rep.Add(int64(len(b)), 0)
			size += int64(len(b))
			return s.WriteBlock(b, 0)
		})
		if err != nil {
			return err
		}
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("dump large object %d: %w", lo.OID, err)
	}
	rep.Done(work, progress.Done{Bytes: size, Elapsed: time.Since(began), Planned: lo.Size})
	return nil
}
