// Command pgsprint dumps, restores and clones PostgreSQL databases in
// parallel through one compressed archive file.
//
// Each cmd_<name>.go has cobra's shape: an options struct ending in the
// flag groups it embeds, a constructor declaring the cobra.Command
// (Use, Short, Long, Example) and registering its flags in --help order,
// then runX(ctx, opts). Repeated-code tools report pairs of these
// declarations (clone~dump, demo~snapshot, list~verify, the flag tails
// and check of clone~restore): they are twins by design, kept apart
// because each command lists its own flags in its own order (SortFlags
// is off) and a shared declaration would hide which flags it takes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/subset"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes, documented in docs/guide/exit-codes.md.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitConnection  = 3
	exitInterrupted = 130 // SIGINT or SIGTERM
	exitHangup      = 129 // SIGHUP: 128 + 1, as a shell reports it
)

// usageError marks errors in how pgsprint was called.
type usageError struct{ error }

func main() {
	start := time.Now()
	ctx, stop := withSignals(context.Background())
	defer stop()
	// A closed pipe on standard output (dump -f - whose reader died) must
	// be a write error with a message, not a silent death by SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	root := newRootCmd()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		os.Exit(exitOK)
	}
	if errors.Is(err, errClosedPipe) && ctx.Err() == nil {
		os.Exit(exitClosedPipe)
	}
	code := exitCode(ctx, err)
	msg := err.Error()
	if i, ok := interrupted(ctx); ok {
		// Whatever the pipeline made of the cancellation (a connect
		// "context canceled", "dump interrupted: ..."), the user sent a
		// signal, and that is the one thing to say.
		msg = i.Error()
		if cmd != nil && cmd != root {
			msg = cmd.Name() + " " + msg
		}
	}
	reportError(cmd, start, pg.OneLine(msg), code)
	os.Exit(code)
}

// reportError prints the error that ends the run: one line on stderr, or
// with --progress=json one JSON "error" event, so that a script reading the
// events sees the failure among them.
func reportError(cmd *cobra.Command, start time.Time, msg string, code int) {
	if cmd != nil && jsonProgress(cmd) {
		progress.WriteError(os.Stderr, start, msg, code)
		return
	}
	fmt.Fprintln(os.Stderr, "pgsprint: error:", msg)
}

// jsonProgress says whether cmd was run with --progress=json (and not -q).
func jsonProgress(cmd *cobra.Command) bool {
	p, q := cmd.Flags().Lookup("progress"), cmd.Flags().Lookup("quiet")
	return p != nil && p.Value.String() == string(progress.JSON) && (q == nil || q.Value.String() != "true")
}

func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var ce *pg.ConnectError
	var ae *store.AccessError
	var re *mask.RefusedError
	var se *subset.RefusedError
	if i, ok := interrupted(ctx); ok {
		return i.exitCode()
	}
	switch {
	case errors.As(err, &ue), errors.As(err, &re), errors.As(err, &se):
		return exitUsage
	case errors.As(err, &ce), errors.As(err, &ae):
		return exitConnection
	}
	return exitFailure
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "pgsprint",
		Short:         "Fast, safe, parallel dump and restore of PostgreSQL databases",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command runs under a soft memory limit (memory.go).
		PersistentPreRun: func(cmd *cobra.Command, _ []string) { followLiveHeap(setMemoryLimit(cmd)) },
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if errors.Is(err, pflag.ErrHelp) {
			return usageError{fmt.Errorf("-h is not help: use %s --help (in pgsprint, as in pg_dump, -h names the database host)", c.CommandPath())}
		}
		return usageError{fmt.Errorf("%w (see %s --help)", err, c.CommandPath())}
	})
	// --version also probes pg_dump, so it is a flag of our own rather
	// than cobra's, which would run the probe on every invocation.
	showVersion := root.Flags().BoolP("version", "V", false, "show pgsprint's version and the pg_dump/pg_restore it found")
	root.Args = noArgs
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if *showVersion {
			fmt.Fprint(cmd.OutOrStdout(), versionText(cmd.Context()))
			return nil
		}
		return cmd.Help()
	}
	root.AddCommand(newChecked(dumpCommand, runDump), newChecked(restoreCommand, runRestore), newChecked(cloneCommand, runClone), newSnapshotCmd(), newListCmd(), newVerifyCmd(), newCompareCmd(), newFollowCmd(), newPreflightCmd(), newDemoCmd(), newMaskCmd(), newVersionCmd(), newGenDocsCmd())
	// Help is --help only, as in the PostgreSQL tools, where -h is the
	// host: cobra's default -h would silently print help instead of
	// connecting (pgsprint compare -h db1 ...).
	helpWithoutShorthand(root)
	return root
}

// helpWithoutShorthand gives c and every command under it a --help flag of
// its own, so that cobra does not add one with -h.
func helpWithoutShorthand(c *cobra.Command) {
	if c.Flags().Lookup("help") == nil {
		c.Flags().Bool("help", false, "show this help")
	}
	for _, sub := range c.Commands() {
		helpWithoutShorthand(sub)
	}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (see %s --help)", args[0], cmd.CommandPath())}
	}
	return nil
}

// checked is a command's options, whose flags are checked once parsed.
type checked interface {
	check(cmd *cobra.Command) error
}

// checkThen makes cmd check the flags o holds, then run with them: dump,
// restore and clone start as their preflights do, and only run differs.
func checkThen[O checked](cmd *cobra.Command, o O, run func(context.Context, O) error) *cobra.Command {
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.check(cmd); err != nil {
			return err
		}
		return run(cmd.Context(), o)
	}
	return cmd
}

// newChecked is the command build makes, checking its flags and then running
// run with a copy of the options: dump, restore and clone are built alike.
func newChecked[O any, P interface {
	*O
	checked
}](build func() (*cobra.Command, P), run func(context.Context, O) error) *cobra.Command {
	cmd, o := build()
	return checkThen(cmd, o, func(ctx context.Context, o P) error { return run(ctx, *o) })
}
