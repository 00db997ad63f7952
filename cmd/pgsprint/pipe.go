package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/term"
)

// notTerminal refuses -f - (file) when the archive would be read from or
// written to a terminal (f, standard input or output): a binary archive is
// neither typed nor shown, and a restore would wait for input forever.
func notTerminal(file string, f *os.File) error {
	if file != "-" || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	if f == os.Stdout {
		return usageError{errors.New("refusing to write a binary archive to a terminal: use -f FILE, or redirect or pipe standard output")}
	}
	return usageError{errors.New("refusing to read a binary archive from a terminal: pipe or redirect an archive into -f -")}
}

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
