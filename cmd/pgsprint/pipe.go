package main

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// exitClosedPipe is the status of a listing whose reader closed the pipe
// early (pgsprint list x.pgs | head): 128 + SIGPIPE, what a shell reports
// for cat, git log or any program the signal ends. The output was not all
// written, so the status is not 0; there is nothing to say about it, so
// nothing is said.
const exitClosedPipe = 141

// errClosedPipe ends a run whose standard output was closed by its reader.
var errClosedPipe = errors.New("standard output closed")

// pipeOut is standard output for commands that write a report or a script
// to it (list, restore --to-sql): it notes when the reader has gone away
// (EPIPE: pgsprint ignores SIGPIPE, so that dump -f - into a dead reader
// fails with a message instead of dying silently).
type pipeOut struct {
	w      io.Writer
	closed bool
	err    error // the first write error, which a report's printing may not check
}

// Write implements io.Writer.
func (p *pipeOut) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.closed = true
	}
	if err != nil && p.err == nil {
		p.err = fmt.Errorf("write standard output: %w", err)
	}
	return n, err
}

// result is err, or errClosedPipe if the reader went away: whatever the
// write failure became on its way up, the pipe's end is the one thing that
// happened.
func (p *pipeOut) result(err error) error {
	switch {
	case p.closed:
		return errClosedPipe
	case err == nil:
		return p.err
	}
	return err
}
