package restore

import (
	"context"
	"errors"
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
	// indexed: the source knew every stream before any was read (a
	// seekable archive's footer), so a stream it lacks is missing, not
	// still to come.
	indexed bool
	// demuxed: the source is a pipe read front to back, whose streams
	// arrive interleaved; one read out of that order makes the others
	// queue in spill files (archive.Demux).
	demuxed bool
	where   string // the archive's location when the restore opened it (opts.File), else ""
}

// damaged names the archive in an error caused by its bytes (a checksum
// mismatch found while a table loads says which stream and frame, not
// which file or object).
func (s *openedSource) damaged(err error) error {
	if s.where == "" || !errors.Is(err, archive.ErrCorrupt) {
		return err
	}
	return fmt.Errorf("archive on %s is damaged: %w", s.where, err)
}

// isIndexed reports whether s knows all its streams up front: a seekable
// archive, or one database's view of it.
func isIndexed(s archive.Source) bool {
	switch v := s.(type) {
	case *archive.Reader:
		return true
	case *archive.DatabaseSource:
		return isIndexed(v.Source)
	}
	return false
}

// isDemuxed reports whether s is a pipe's streams taken apart as they
// arrive, or one database's view of them.
func isDemuxed(s archive.Source) bool {
	switch v := s.(type) {
	case *archive.Demux:
		return true
	case *archive.DatabaseSource:
		return isDemuxed(v.Source)
	}
	return false
}

// openSource returns what the restore reads: opts.Source, or the archive
// at opts.File, whatever its medium (archive.OpenLocation). A source read
// front to back (a pipe) knows only at its end whether it was whole.
func openSource(ctx context.Context, opts Options) (*openedSource, error) {
	src := &openedSource{close: func() {}, finish: func() error { return nil }, skip: func(...uint32) {}}
	if opts.Source != nil {
		src.Source, src.indexed, src.demuxed = opts.Source, isIndexed(opts.Source), isDemuxed(opts.Source)
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
	ar, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Parallel, SpillDir: opts.SpillDir, Identities: opts.Identities})
	if err != nil {
		return nil, err
	}
	src.Source, src.close, src.indexed, src.where = ar.Source, func() { ar.Close() }, isIndexed(ar.Source), b.String()
	src.demuxed = isDemuxed(ar.Source)
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
