package restore

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// openedSource is what the restore reads, with the check of its end
// taken when it is opened: wrapping the source later (progress counting)
// must never hide a Finisher.
type openedSource struct {
	archive.Source
	close  func()
	finish func() error    // nil error: everything delivered was complete
	skip   func(...uint32) // tells the source streams will not be read
}

// openSource returns what the restore reads: opts.Source, or the archive
// at opts.File, whatever its medium (archive.OpenLocation). A source read
// front to back (a pipe) knows only at its end whether it was whole.
func openSource(ctx context.Context, opts Options) (*openedSource, error) {
	src := &openedSource{close: func() {}, finish: func() error { return nil }, skip: func(...uint32) {}}
	if opts.Source != nil {
		src.Source = opts.Source
		if f, ok := opts.Source.(archive.Finisher); ok {
			src.finish = f.Finish
		}
		if s, ok := opts.Source.(archive.Skipper); ok {
			src.skip = s.Skip
		}
		return src, nil
	}
	lo := opts.Location
	lo.In = opts.Stdin
	b, err := location.Parse(opts.File, lo)
	if err != nil {
		return nil, err
	}
	ar, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Parallel, SpillDir: opts.SpillDir})
	if err != nil {
		return nil, err
	}
	src.Source, src.close = ar.Source, func() { ar.Close() }
	if f, ok := ar.Source.(archive.Finisher); ok {
		src.finish = func() error {
			if err := f.Finish(); err != nil {
				return fmt.Errorf("archive on %s is incomplete or damaged (%w); the target is partly restored: restore again with --clean", b, err)
			}
			return nil
		}
	}
	if s, ok := ar.Source.(archive.Skipper); ok {
		src.skip = s.Skip
	}
	return src, nil
}

// finishSource checks the source's end after every load.
func (r *run) finishSource() error { return r.finish() }

// skipDone tells the source which streams an earlier run loaded: this run
// will not read them.
func (r *run) skipDone() {
	for _, c := range r.m.Chunks {
		if r.j.isDone(chunkStep(c.Stream)) {
			r.skip(c.Stream)
		}
	}
	for _, lo := range r.m.LargeObjects {
		if r.j.isDone(chunkStep(lo.Stream)) {
			r.skip(lo.Stream)
		}
	}
}

// plannedBytes is a stream's raw size for scheduling: exact when the
// source already knows it (a seekable archive's footer), else the
// manifest's estimate (a pipe or a live source knows a stream's size only
// at its end): the table's relation size shared by its chunks, or the
// large object's size.
func (r *run) plannedBytes(id uint32, estimate int64) int64 {
	if info, ok := r.ar.Stream(id); ok {
		return info.RawBytes
	}
	return estimate
}

// missing reports a stream a seekable archive does not have: its footer
// is complete, so the archive is damaged or forged.
func (r *run) missing(id uint32) bool {
	ar, ok := r.ar.(*archive.Reader)
	if !ok {
		return false
	}
	_, found := ar.Stream(id)
	return !found
}

// checkRows compares the rows a chunk loaded with those its source
// delivered, known once the stream has been read to its end.
func (r *run) checkRows(c *archive.Chunk, loaded int64) error {
	info, ok := r.ar.Stream(c.Stream)
	if !ok {
		return fmt.Errorf("restore table %s: stream %d ended without its totals", r.tableName(c), c.Stream)
	}
	if loaded != info.Rows {
		return fmt.Errorf("restore table %s: loaded %d rows, archive holds %d", r.tableName(c), loaded, info.Rows)
	}
	return nil
}
