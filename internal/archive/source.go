package archive

import (
	"context"
	"filippo.io/age"
	"io"

	"github.com/pgsprint/pgsprint/internal/store"
)

// Source is what a restore reads: the seekable Reader, the Demux over a
// pipe, or clone's live source. Stream totals of a Demux or a live source
// are known only once the stream's end has been read, so planning must
// fall back to the manifest's estimates when Stream reports false.
// Every implementation passes the suite in internal/archive/archivetest.
type Source interface {
	Manifest() *Manifest
	OpenStream(id uint32) io.ReadCloser
	Stream(id uint32) (*StreamInfo, bool)
	// Order says in which order the streams are best read, and whether a
	// stream not known yet may still come.
	Order() Order
}

// Order is how a Source's streams become readable, which decides how a
// restore schedules its reads and what a stream it lacks means.
type Order int

const (
	// Indexed: every stream was known before any was read (a seekable
	// archive's footer), to be read in any order; a stream the source
	// lacks is missing, not still to come.
	Indexed Order = iota
	// Interleaved: a pipe read front to back, whose streams arrive
	// interleaved (Demux); reading one out of that order makes the others
	// queue in spill files, and a stream not seen yet may still come.
	Interleaved
	// OnDemand: each stream is produced when it is opened (clone's COPY
	// from the source), in any order; its totals are known at its end.
	OnDemand
)

// Finisher is a source that knows only at its end whether everything it
// delivered was complete and sound: a Demux over a pipe (the trailer was
// read and checked) or clone's live source (every COPY finished, the
// snapshot ended cleanly). A restore calls Finish after the last load and
// fails if it errors, so a cut pipe never ends in success. A Reader has no
// Finish: Open checked its trailer and footer before anything was read.
type Finisher interface {
	Finish() error
}

// Skipper is a source that must be told which streams the restore will
// not read, because an earlier, interrupted run loaded them (the journal
// says so) or the selection leaves them out: clone's live source, whose end
// check otherwise requires every stream to have been read, and a Demux,
// which would otherwise spill them to disk. A restore calls Skip before
// loading anything.
type Skipper interface {
	Skip(ids ...uint32)
}

var (
	_ Source   = (*Reader)(nil)
	_ Source   = (*Demux)(nil)
	_ Finisher = (*Demux)(nil)
	_ Skipper  = (*Demux)(nil)
)

// Access says how a command will read an archive, which decides how an
// archive on a medium that can only be read front to back is opened.
// An archive with random access is a Reader in every case.
type Access int

const (
	// Parallel: streams are opened in any order, several at once (a
	// restore). A front-to-back archive is demultiplexed as it arrives
	// (Demux), streams not opened yet spilled to SpillDir.
	Parallel Access = iota
	// Ordered: streams are read one after another in the manifest's
	// order (restore --to-sql, restore -l). A front-to-back archive is
	// first copied whole into an unlinked file in SpillDir.
	Ordered
	// Scan: no stream is opened; every frame is checked once and the
	// streams totalled (list, verify: see Summarize and Check). A
	// front-to-back archive is read through, nothing kept.
	Scan
)

// OpenOptions say how to open an archive.
type OpenOptions struct {
	Access Access
	// SpillDir holds what a front-to-back archive must keep on disk
	// (os.TempDir() when empty).
	SpillDir string
	// Identities open an encrypted archive (see Open).
	Identities []age.Identity
}

// OpenSource opens the archive in src: the one place that chooses between
// random access (Open: the footer index, streams read in parallel) and a
// front-to-back read (a Demux, or the archive spooled to disk), from the
// medium's Random. Nothing above it branches on the medium. It checks
// what can be checked before anything is read (the header; with random
// access, the trailer and footer too) and returns ErrNotArchive,
// ErrIncomplete, a *VersionError or an error matching ErrCorrupt.
func OpenSource(ctx context.Context, src store.Source, o OpenOptions) (Source, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r, size, ok := src.Random(); ok {
		return Open(r, size, o.Identities...)
	}
	switch o.Access {
	case Ordered:
		return spool(src.Sequential(), o.SpillDir, o.Identities...)
	case Scan:
		return newDemux(src.Sequential(), o.SpillDir, true, o.Identities...)
	}
	return newDemux(src.Sequential(), o.SpillDir, false, o.Identities...)
}

// Opened is an archive opened at a location, with the medium it reads.
type Opened struct {
	// Source is a *Reader when the medium has random access (or the
	// archive was spooled), else a *Demux.
	Source
	src     store.Source
	where   string
	closers []io.Closer
}

// String names the archive's location, for messages.
func (o *Opened) String() string { return o.where }

// Close releases the archive and its medium.
func (o *Opened) Close() error {
	for _, c := range o.closers {
		c.Close()
	}
	return o.src.Close()
}

// OpenLocation opens the archive at b with OpenSource. Errors of the
// medium say what failed themselves ("open archive: ... no such file");
// errors of the archive are prefixed with its location ("archive on
// standard input: archive is incomplete ...").
func OpenLocation(ctx context.Context, b store.Backend, o OpenOptions) (*Opened, error) {
	src, err := b.Open(ctx)
	if err != nil {
		return nil, err
	}
	ar, err := OpenSource(ctx, src, o)
	if err != nil {
		src.Close()
		return nil, On(b.String(), err)
	}
	op := &Opened{Source: ar, src: src, where: b.String()}
	if c, ok := ar.(io.Closer); ok {
		op.closers = append(op.closers, c)
	}
	return op, nil
}
