// Command pgsprint dumps, restores and clones PostgreSQL databases in
// parallel through one compressed archive file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes, documented in the README.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitConnection  = 3
	exitInterrupted = 130
)

// usageError marks errors in how pgsprint was called.
type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A closed pipe on standard output (dump -f - whose reader died) must
	// be a write error with a message, not a silent death by SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	if err == nil {
		os.Exit(exitOK)
	}
	fmt.Fprintln(os.Stderr, "pgsprint: error:", err)
	os.Exit(exitCode(ctx, err))
}

func exitCode(ctx context.Context, err error) int {
	var ue usageError
	var ce *pg.ConnectError
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ce):
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
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
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
	root.AddCommand(newDumpCmd(), newRestoreCmd(), newCloneCmd(), newSnapshotCmd(), newListCmd(), newVerifyCmd(), newCompareCmd(), newDemoCmd(), newVersionCmd())
	return root
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q (see %s --help)", args[0], cmd.CommandPath())}
	}
	return nil
}
