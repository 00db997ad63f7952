package store

import "io"

// Range is a span of an archive's bytes: Len bytes from offset Off.
type Range struct {
	Off, Len int64
}

// RangeReader is an optional interface of the io.ReaderAt that a remote
// Source's Random returns. A stream reader knows every frame it will read
// before it reads the first; handing the list over lets the medium fetch
// them ahead, neighbours coalesced into larger requests and several
// requests in flight, instead of one round trip per frame. Reading
// through ReadAt stays correct, only slower.
type RangeReader interface {
	// ReadRanges returns the bytes of ranges, in the order given,
	// concatenated. Fetching starts at the first Read, and memory stays
	// bounded however long the list. Close stops fetching; the reader is
	// used by one goroutine.
	ReadRanges(ranges []Range) io.ReadCloser
}

// AccessError is a medium that could not be reached or that refused who
// we are: no credentials, a wrong secret, an unknown endpoint, a refused
// connection. Like a database that refuses a connection, it exits 3.
type AccessError struct {
	Err error
}

// Error implements error.
func (e *AccessError) Error() string { return e.Err.Error() }

// Unwrap lets errors.Is and errors.As see the cause.
func (e *AccessError) Unwrap() error { return e.Err }
