package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// interruption is why a run was cancelled: a signal that asks it to stop.
// Every such signal stops the run the same way (workers cancelled,
// server-side queries cancelled, temporary and partial files removed);
// only the exit code differs.
type interruption struct{ sig syscall.Signal }

func (i interruption) Error() string { return "interrupted by " + signalName(i.sig) }

// exitCode is the shell's 128+N for SIGHUP (129: the terminal went away),
// and 130 for SIGINT and SIGTERM, as documented since the first release.
func (i interruption) exitCode() int {
	if i.sig == syscall.SIGHUP {
		return exitHangup
	}
	return exitInterrupted
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// withSignals returns a context cancelled, with an interruption as its
// cause, by the first of the signals that end a run cleanly: Ctrl-C,
// kill's SIGTERM and a closed terminal's SIGHUP (whose default would kill
// pgsprint on the spot and leave its partial files). Later signals are
// ignored until stop is called: a second Ctrl-C must not kill the cleanup
// half-way. Under nohup (SIGHUP ignored when pgsprint starts) SIGHUP stays
// ignored: Notify would otherwise install a handler and a closed terminal
// would stop the run nohup was meant to protect.
func withSignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := []os.Signal{syscall.SIGINT, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(interruption{s.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// interrupted returns the signal that cancelled ctx, if one did.
func interrupted(ctx context.Context) (interruption, bool) {
	var i interruption
	ok := errors.As(context.Cause(ctx), &i)
	return i, ok
}

// removeStale removes the temporary files that killed runs (SIGKILL, a
// crash) left in dir matching patterns, saying which: pgsprint removes
// its own on every exit it survives, so a file of a process that no
// longer exists is garbage.
func removeStale(log *slog.Logger, dir string, patterns ...string) {
	removed, err := tempfile.Sweep(dir, patterns...)
	for _, s := range removed {
		log.Warn("removed a stale temporary file left by a killed run", "file", s.Path, "pid", s.PID)
	}
	if err != nil {
		log.Warn("could not remove a stale temporary file", "err", err)
	}
}
