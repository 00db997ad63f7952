package dump

import (
	"context"
	"fmt"

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

// writeSchema runs pg_dump in the session's snapshot into the manifest's
// schema stream of w.
func (s *Session) writeSchema(ctx context.Context, w *archive.Writer, blockSize int) error {
	return dumpSchema(ctx, s, w.Stream(archive.KindSchema, s.Manifest.SchemaStream), blockSize)
}

// Sessions is what Write reads into an archive: the sessions, and their
// units in the order the workers take them (largest first).
type Sessions struct {
	List  []*Session
	Units []Unit
	// PerDatabase names each unit's database in errors and progress: a
	// whole-server dump, whose tables of one name may be in several
	// databases.
	PerDatabase bool
}

// Written is what Write moved into the archive.
type Written struct {
	Rows        int64
	RawBytes    int64 // table data before compression
	StoredBytes int64 // table data as stored
}

// Write fills an archive begun by CreateArchive and completes it, for a
// dump of one database (Run) and of a whole server alike: the work on one
// pool (runPool), the archive's footer, each session's snapshot ended
// (only now: every reader has finished with it), and the archive made
// visible at its location. opts are as WithDefaults returns them: the
// caller's entry point (Run, cluster.Dump) filled them once. The rows
// are counted on error too.
func Write(ctx context.Context, opts Options, a *Archive, work Sessions) (Written, error) {
	var res Written
	rows, err := runPool(ctx, opts, a.w, work)
	res.Rows = rows
	if err != nil {
		return res, err
	}
	opts.Progress.Phase("finish")
	if err := a.w.Close(); err != nil {
		return res, fmt.Errorf("write archive footer: %w", err)
	}
	for _, s := range work.List {
		if err := s.Commit(ctx); err != nil {
			return res, inDatabase(work.PerDatabase, s, err)
		}
	}
	if err := a.out.commit(ctx); err != nil {
		return res, err
	}
	res.RawBytes, res.StoredBytes = a.w.DataBytes()
	return res, nil
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
func runPool(ctx context.Context, opts Options, w *archive.Writer, work Sessions) (int64, error) {
	in := func(s *Session, err error) error { return inDatabase(work.PerDatabase, s, err) }
	g, gctx := errgroup.WithContext(ctx)
	schemaDone := make(chan struct{})
	g.Go(func() error {
		defer close(schemaDone)
		sg, sctx := errgroup.WithContext(gctx)
		sg.SetLimit(opts.Jobs)
		for _, s := range work.List {
			sg.Go(func() error {
				if err := s.writeSchema(sctx, w, opts.BlockSize); err != nil {
					return in(s, err)
				}
				return nil
			})
		}
		return sg.Wait()
	})
	units := make(chan Unit)
	g.Go(func() error {
		defer close(units)
		for _, u := range work.Units {
			select {
			case units <- u:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	rows := make([]int64, opts.Jobs)
	var parts *progress.Parts
	if work.PerDatabase {
		// Tables are named after their database: two databases' tables
		// of the same name are two tables in the summary's largest.
		parts = progress.NewParts(opts.Progress, "dump")
	}
	giveWay := longSchema(work.List)
	for i := range opts.Jobs {
		g.Go(func() error {
			if !startsBesideSchema(i, opts.Jobs, giveWay) {
				select {
				case <-schemaDone:
				case <-gctx.Done():
					return nil // the error that ended the run is another's
				}
			}
			k := &worker{w: w, blockSize: opts.BlockSize, progress: opts.Progress, parts: parts}
			defer k.close(gctx)
			for u := range units {
				n, err := k.dump(gctx, u)
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

// worker dumps units of any session on one connection at a time: a
// reader in the snapshot of the session of the unit it was last given,
// replaced when a unit of another session comes.
type worker struct {
	w         *archive.Writer
	blockSize int
	progress  progress.Reporter
	sess      *Session
	r         *Reader
	// parts, when set, reports each unit as work of its session's
	// database (a whole-server dump).
	parts *progress.Parts
}

// dump dumps one unit and returns the rows it copied.
func (k *worker) dump(ctx context.Context, u Unit) (int64, error) {
	if k.sess != u.sess {
		k.close(ctx)
		r, err := u.sess.OpenReader(ctx)
		if err != nil {
			return 0, err
		}
		k.sess, k.r = u.sess, r
	}
	rep := k.progress
	if k.parts != nil {
		rep = k.parts.Part(u.sess.Manifest.Database)
	}
	return k.dumpUnit(ctx, rep, u.sess.Manifest, u.u)
}

// close closes the worker's connection, if any.
func (k *worker) close(ctx context.Context) {
	if k.r != nil {
		k.r.Close(ctx)
	}
	k.sess, k.r = nil, nil
}

// Archive is an archive being written (CreateArchive): where its bytes
// go, visible at the location only once Write completes it, and the
// writer of its streams.
type Archive struct {
	out *output
	w   *archive.Writer
}

// Writer is the writer of the archive's streams, for what a caller adds
// beside the sessions' (a whole-server dump's globals).
func (a *Archive) Writer() *archive.Writer { return a.w }

// Abort discards what was written, unless Write completed the archive.
func (a *Archive) Abort() { a.out.Abort() }

// CreateArchive starts the archive at opts.File (createOutput: opts.Location,
// opts.Overwrite; plan sizes the parts of an upload), once the file
// system there was found to have room for plan's bytes (checkSpace),
// with m's header, encrypted to opts.Recipients if any: what a dump of
// one database and of a whole server write into. The caller Aborts it;
// on error nothing is left at the location.
func CreateArchive(ctx context.Context, opts Options, m *archive.Manifest, plan progress.Expected) (*Archive, error) {
	if err := checkSpace(opts, plan); err != nil {
		return nil, err
	}
	out, err := createOutput(ctx, opts, plan)
	if err != nil {
		return nil, err
	}
	w, err := archive.NewWriter(out, m, opts.Codec, opts.Recipients...)
	if err != nil {
		out.Abort()
		return nil, fmt.Errorf("write archive header: %w", err)
	}
	return &Archive{out: out, w: w}, nil
}
