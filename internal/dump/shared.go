package dump

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// This file lets a caller run the work of several sessions (one per
// database of a whole-server dump) on one pool of workers writing one
// archive: each session's streams are renumbered to be unique in the
// archive, and a worker moves from one session's snapshot to another's as
// the units it takes come from them.

// Unit is one piece of a session's data work (a chunk, a batch of small
// tables or a batch of large objects), for a caller that schedules several
// sessions' work itself.
type Unit struct {
	sess *Session
	u    unit
}

// Size is the unit's estimated bytes, by which work is ordered largest
// first.
func (u Unit) Size() int64 { return u.u.size }

// Session is the session the unit belongs to.
func (u Unit) Session() *Session { return u.sess }

// Units is the session's data work, largest first.
func (s *Session) Units() []Unit {
	var us []Unit
	for _, u := range planUnits(s.Manifest, s.sizes) {
		us = append(us, Unit{sess: s, u: u})
	}
	return us
}

// Renumber adds base to every stream id of the session's manifest (schema,
// chunks, large objects), so that several sessions' streams can share one
// archive, and returns the first id after them. Call it before Units.
func (s *Session) Renumber(base uint32) uint32 {
	m := s.Manifest
	next := m.SchemaStream + base + 1
	m.SchemaStream += base
	sizes := make(map[uint32]int64, len(s.sizes))
	for i := range m.Chunks {
		c := &m.Chunks[i]
		sizes[c.Stream+base] = s.sizes[c.Stream]
		c.Stream += base
		next = max(next, c.Stream+1)
	}
	for i := range m.LargeObjects {
		lo := &m.LargeObjects[i]
		sizes[lo.Stream+base] = s.sizes[lo.Stream]
		lo.Stream += base
		next = max(next, lo.Stream+1)
	}
	s.sizes = sizes
	return next
}

// WriteSchema runs pg_dump in the session's snapshot into the manifest's
// schema stream of w.
func (s *Session) WriteSchema(ctx context.Context, w *archive.Writer, blockSize int) error {
	if blockSize <= 0 {
		blockSize = archive.DefaultBlockSize
	}
	return dumpSchema(ctx, s, w.Stream(archive.KindSchema, s.Manifest.SchemaStream), blockSize)
}

// Write fills an archive begun by CreateArchive and completes it, for a
// dump of one database (Run) and of a whole server alike: the sessions'
// work on one pool (runPool), the archive's footer, each session's
// snapshot ended (only now: every reader has finished with it), and the
// archive made visible at its location. It adds the rows copied and the
// bytes written to res. perDatabase names the database in errors.
func Write(ctx context.Context, opts Options, out Output, w *archive.Writer, sessions []*Session, units []Unit, perDatabase bool, res *Result) error {
	opts = opts.WithDefaults()
	rows, err := runPool(ctx, opts, w, sessions, units, perDatabase)
	res.Rows += rows
	if err != nil {
		return err
	}
	opts.Progress.Phase("finish")
	if err := w.Close(); err != nil {
		return fmt.Errorf("write archive footer: %w", err)
	}
	for _, s := range sessions {
		if err := s.Commit(ctx); err != nil {
			return inDatabase(perDatabase, s, err)
		}
	}
	if err := out.Commit(ctx); err != nil {
		return err
	}
	raw, stored := w.DataBytes()
	res.RawBytes += raw
	res.StoredBytes += stored
	return nil
}

// inDatabase is err, naming s's database when perDatabase.
func inDatabase(perDatabase bool, s *Session, err error) error {
	if !perDatabase {
		return err
	}
	return fmt.Errorf("database %s: %w", pg.Ident(s.Manifest.Database), err)
}

// runPool is the one worker pool of every dump (Write): each session's
// pg_dump --schema-only (at most opts.Jobs at once, each also waiting for
// its locks to fit the sessions' LockBudget) beside opts.Jobs data Workers
// taking units in the order given (largest first), whatever their
// session; one of them gives way to the schema pass (startsBesideSchema). The first error cancels everything: pg_dumps are killed,
// readers closed. It returns the rows copied.
func runPool(ctx context.Context, opts Options, w *archive.Writer, sessions []*Session, units []Unit, perDatabase bool) (int64, error) {
	in := func(s *Session, err error) error { return inDatabase(perDatabase, s, err) }
	g, gctx := errgroup.WithContext(ctx)
	schemaDone := make(chan struct{})
	g.Go(func() error {
		defer close(schemaDone)
		sg, sctx := errgroup.WithContext(gctx)
		sg.SetLimit(opts.Jobs)
		for _, s := range sessions {
			sg.Go(func() error {
				if err := s.WriteSchema(sctx, w, opts.BlockSize); err != nil {
					return in(s, err)
				}
				return nil
			})
		}
		return sg.Wait()
	})
	work := make(chan Unit)
	g.Go(func() error {
		defer close(work)
		for _, u := range units {
			select {
			case work <- u:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	rows := make([]int64, opts.Jobs)
	var parts *progress.Parts
	if perDatabase {
		// Tables are named after their database: two databases' tables
		// of the same name are two tables in the summary's largest.
		parts = progress.NewParts(opts.Progress, "dump")
	}
	for i := range opts.Jobs {
		g.Go(func() error {
			if !startsBesideSchema(i, opts.Jobs) {
				select {
				case <-schemaDone:
				case <-gctx.Done():
					return nil // the error that ended the run is another's
				}
			}
			k := NewWorker(opts, w)
			k.parts = parts
			defer k.Close(gctx)
			for u := range work {
				n, err := k.Dump(gctx, u)
				rows[i] += n
				if err != nil {
					return in(u.sess, err)
				}
			}
			return nil
		})
	}
	err := g.Wait()
	var total int64
	for _, n := range rows {
		total += n
	}
	if err != nil && ctx.Err() != nil {
		return total, fmt.Errorf("dump interrupted: %w", context.Cause(ctx))
	}
	return total, err
}

// Worker dumps units of any session on one connection at a time: a
// reader in the snapshot of the session of the unit it was last given,
// replaced when a unit of another session comes.
type Worker struct {
	opts Options
	w    *archive.Writer
	sess *Session
	r    *Reader
	// parts, when set, reports each unit as work of its session's
	// database (a whole-server dump).
	parts *progress.Parts
}

// NewWorker returns a worker writing into w; opts gives the block size and
// the progress reporter.
func NewWorker(opts Options, w *archive.Writer) *Worker {
	if opts.BlockSize <= 0 {
		opts.BlockSize = archive.DefaultBlockSize
	}
	return &Worker{opts: opts, w: w}
}

// Dump dumps one unit and returns the rows it copied.
func (k *Worker) Dump(ctx context.Context, u Unit) (int64, error) {
	if k.sess != u.sess {
		k.Close(ctx)
		r, err := u.sess.OpenReader(ctx)
		if err != nil {
			return 0, err
		}
		k.sess, k.r = u.sess, r
	}
	opts := k.opts
	if k.parts != nil {
		opts.Progress = k.parts.Part(u.sess.Manifest.Database)
	}
	return dumpUnit(ctx, opts, k.w, u.sess.Manifest, k.r, u.u)
}

// Close closes the worker's connection, if any.
func (k *Worker) Close(ctx context.Context) {
	if k.r != nil {
		k.r.Close(ctx)
	}
	k.sess, k.r = nil, nil
}

// Output is where an archive's bytes go (OpenOutput), whatever the
// medium: nothing is visible at the location until Commit.
type Output interface {
	io.Writer
	Commit(ctx context.Context) error // the archive is complete: make it visible
	Abort()                           // discard what was written
}

// OpenOutput starts the archive at opts.File as Run does (opts.Location,
// opts.Overwrite; plan sizes the parts of an upload).
func OpenOutput(ctx context.Context, opts Options, plan progress.Expected) (Output, error) {
	out, err := createOutput(ctx, opts, plan)
	if err != nil {
		return nil, err
	}
	return outputCommitter{out}, nil
}

// CreateArchive starts the archive at opts.File (OpenOutput), once the
// file system there was found to have room for plan's bytes (checkSpace),
// with m's header, encrypted to opts.Recipients if any: what a dump of one database
// and of a whole server write into. The caller Aborts the output unless it
// Commits it; on error nothing is left at the location.
func CreateArchive(ctx context.Context, opts Options, m *archive.Manifest, plan progress.Expected) (Output, *archive.Writer, error) {
	if err := checkSpace(opts, plan); err != nil {
		return nil, nil, err
	}
	out, err := OpenOutput(ctx, opts, plan)
	if err != nil {
		return nil, nil, err
	}
	w, err := archive.NewWriter(out, m, opts.Codec, opts.Recipients...)
	if err != nil {
		out.Abort()
		return nil, nil, fmt.Errorf("write archive header: %w", err)
	}
	return out, w, nil
}

// outputCommitter gives an output the Commit of the Output interface.
type outputCommitter struct{ *output }

// Commit makes the archive visible at its location.
func (o outputCommitter) Commit(ctx context.Context) error { return o.output.commit(ctx) }
