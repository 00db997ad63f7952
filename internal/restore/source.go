package restore

import (
	"errors"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// openedSource is what the restore reads, with the check of its end
// taken when it is opened: wrapping the source later (progress counting)
// must never hide a Finisher.
type openedSource struct {
	archive.Source
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
	where   string // Options.Where: the archive's location, else ""
}

// damaged names the archive in an error caused by its bytes (a checksum
// mismatch found while a table loads says which stream and frame, not
// which file or object), or by its end (a pipe cut before the trailer).
func (s *openedSource) damaged(err error) error {
	switch {
	case s.where == "":
		return err
	case errors.Is(err, archive.ErrCorrupt), errors.Is(err, archive.ErrIncomplete):
		return archive.On(s.where, err)
	}
	return err
}

// openSource returns what the restore reads from src, which the archive
// at where is (empty for a source that names no location: clone's, or
// one database of a whole-server archive). A source read front to back
// (a pipe) knows only at its end whether it was whole.
func openSource(src archive.Source, where string) *openedSource {
	o := &openedSource{Source: src, finish: func() error { return nil }, skip: func(...uint32) {}, where: where,
		indexed: src.Order() == archive.Indexed, demuxed: src.Order() == archive.Interleaved}
	if f, ok := src.(archive.Finisher); ok {
		o.finish = f.Finish // its error is named by damaged, as any other
	}
	if s, ok := src.(archive.Skipper); ok {
		o.skip = s.Skip
	}
	return o
}
