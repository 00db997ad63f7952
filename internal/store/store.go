// Package store is where archive bytes live: a local file, standard
// input/output, an object store, a web server. dump writes an archive
// through a Sink and restore, list and verify read one through a Source,
// without knowing the medium. Each medium is a small package beside this
// one, and every one passes the conformance suite in storetest.
//
// A medium that can read at any offset (a file, an object with ranged
// GETs) lets a restore read its streams in parallel from the footer index;
// one that can only be read front to back (a pipe) is demultiplexed as it
// arrives. The archive package chooses between the two from the Source's
// Random method, in one place: nothing above it branches on the medium.
package store

import (
	"context"
	"errors"
	"io"
)

// Backend is one archive location, what -f names: dump creates an archive
// there, restore, list and verify open it.
type Backend interface {
	// Create starts writing a new archive at the location. Nothing at the
	// location looks like an archive until Sink.Commit has returned nil.
	Create(ctx context.Context, opts CreateOptions) (Sink, error)
	// Open opens the archive at the location for reading. A location
	// that does not exist is an error matching ErrNotFound.
	Open(ctx context.Context) (Source, error)
	// String names the location for messages; it never holds a secret.
	String() string
}

// CreateOptions are what a dump knows before it writes its first byte.
type CreateOptions struct {
	// SizeHint is the planned archive size in bytes (0 when unknown), so
	// that a medium writing in parts can size them.
	SizeHint int64
	// Overwrite lets Create replace an existing archive. A local file is
	// replaced whatever it says, as pg_dump replaces its -f file.
	Overwrite bool
}

// Sink is an archive being written. Writes are sequential (one writer);
// a medium may upload in parallel behind them.
type Sink interface {
	io.Writer
	// Commit makes the archive visible, complete, at its location. After
	// an error nothing new is visible there.
	Commit(ctx context.Context) error
	// Abort discards everything written; after a successful Commit it
	// does nothing. It may be called more than once.
	Abort()
}

// Source is an opened archive.
type Source interface {
	// Random returns random access to the archive and its size; ok is
	// false when the medium can only be read front to back. The ReaderAt
	// is safe for concurrent use: restore workers read different
	// streams at once.
	Random() (r io.ReaderAt, size int64, ok bool)
	// Sequential returns the archive from its first byte. It is called
	// at most once, and only when Random reports false.
	Sequential() io.Reader
	// Close releases the source.
	Close() error
}

// ErrNotFound is returned by Open when nothing is at the location.
var ErrNotFound = errors.New("archive not found")

// ErrExists is returned by Create when an archive is already at the
// location and CreateOptions.Overwrite is false.
var ErrExists = errors.New("archive already exists")
