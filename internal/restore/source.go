package restore

import (
	"fmt"
	"os"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// Finisher is a source that knows only at its end whether everything it
// delivered was complete and sound: a Demux over a pipe (the trailer was
// read and checked) or clone's live source (every COPY finished, the
// snapshot ended cleanly). The restore calls Finish after the last load and
// fails if it errors, so a cut pipe never ends in success.
type Finisher interface {
	Finish() error
}

// Skipper is a source that must be told which streams the restore will
// not read, because an earlier, interrupted run loaded them (the journal
// says so) or the selection leaves them out: clone's live source, whose end
// check otherwise requires every stream to have been read, and a Demux,
// which would otherwise spill them to disk. The restore calls Skip before
// loading anything.
type Skipper interface {
	Skip(ids ...uint32)
}

// openedSource is what the restore reads, with the check of its end
// taken when it is opened: wrapping the source later (progress counting)
// must never hide a Finisher.
type openedSource struct {
	archive.Source
	close  func()
	finish func() error    // nil error: everything delivered was complete
	skip   func(...uint32) // tells the source streams will not be read
}

// openSource returns what the restore reads: opts.Source, the archive on
// standard input (File "-") demultiplexed as it arrives, or the seekable
// archive file (checked whole by Open, so nothing to finish).
func openSource(opts Options) (*openedSource, error) {
	none := func() error { return nil }
	switch {
	case opts.Source != nil:
		finish := none
		if f, ok := opts.Source.(Finisher); ok {
			finish = f.Finish
		}
		skip := func(...uint32) {}
		if s, ok := opts.Source.(Skipper); ok {
			skip = s.Skip
		}
		return &openedSource{Source: opts.Source, close: func() {}, finish: finish, skip: skip}, nil
	case opts.File == "-":
		in := opts.Stdin
		if in == nil {
			in = os.Stdin
		}
		d, err := archive.NewDemux(in, opts.SpillDir, opts.Identities...)
		if err != nil {
			return nil, fmt.Errorf("read archive from standard input: %w", err)
		}
		return &openedSource{Source: d, close: func() {}, finish: demuxSource{d}.Finish, skip: d.Skip}, nil
	}
	f, err := os.Open(opts.File)
	if err != nil {
		return nil, fmt.Errorf("open archive: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open archive: %w", err)
	}
	ar, err := archive.Open(f, st.Size(), opts.Identities...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open archive %s: %w", opts.File, err)
	}
	return &openedSource{Source: ar, close: func() { f.Close() }, finish: none, skip: func(...uint32) {}}, nil
}

// demuxSource is a Demux whose end is checked by Finish.
type demuxSource struct{ *archive.Demux }

// Finish waits for the archive's trailer.
func (d demuxSource) Finish() error {
	if err := d.Wait(); err != nil {
		return fmt.Errorf("archive on standard input is incomplete or damaged (%w); the target is partly restored: restore again with --clean", err)
	}
	return nil
}
