package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/snapshot"
)

type snapshotOptions struct {
	conn     connFlags
	log      logFlags
	lockWait string
}

func newSnapshotCmd() *cobra.Command {
	var o snapshotOptions
	cmd := &cobra.Command{
		Use:   "snapshot -d SOURCE",
		Short: "Export a snapshot of a database and hold it, for clone --snapshot and --resume",
		Long: `Export a snapshot of the source and hold it until told to stop.

A clone reads the source in one snapshot, which lives only as long as the
transaction that exported it. A clone that exports its own loses it when it
is killed, and a new snapshot would mix two instants of the source. This
command holds the snapshot in a process of its own: clone --snapshot ID
reads in it, and if the clone is interrupted (even killed), the same command
with --resume finishes it in the very same instant, skipping what was done.

The snapshot id is printed on standard output, one line, as soon as the
snapshot is exported and every table is locked in ACCESS SHARE mode (as
pg_dump -Fc locks them for its whole run: TRUNCATE, ALTER TABLE and other
rewrites would make an old snapshot read a table as empty, so they wait
until the holder ends; ordinary writes go on). A hint goes to standard
error.

It holds until SIGINT, SIGTERM or SIGHUP, or until its standard input, if it is a
pipe (a coprocess), reaches end of file; then it exits 0. It exits non-zero
if the connection is lost, since the snapshot is then gone. While it holds,
VACUUM cannot remove rows the snapshot may see: end it when the clone is
done.`,
		Example: `  pgsprint snapshot -d prod > snap.id &      # hold a snapshot of prod
  until [ -s snap.id ]; do sleep 0.1; done    # wait until it is exported
  pgsprint clone --source prod --target copy --snapshot "$(cat snap.id)"
  # ... the clone is killed; finish it in the same snapshot:
  pgsprint clone --source prod --target copy --snapshot "$(cat snap.id)" --resume
  kill %1                                     # release the snapshot

  coproc SNAP { pgsprint snapshot -d prod; } # bash: ends when the script does
  read -r ID <&"${SNAP[0]}"
  pgsprint clone --source prod --target copy --snapshot "$ID" --resume`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSnapshot(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	o.conn.register(fs)
	fs.StringVar(&o.lockWait, "lock-wait-timeout", "", "fail instead of waiting longer than this for a table lock (e.g. 30s, 500ms, 2min; a bare number is milliseconds; as pg_dump)")
	o.log.register(fs)
	return cmd
}

func runSnapshot(ctx context.Context, o snapshotOptions) error {
	if o.conn.DSN == "" {
		return usageError{fmt.Errorf("no source database given: use -d SOURCE")}
	}
	if err := checkLockWait(o.lockWait); err != nil {
		return err
	}
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	hint := io.Writer(os.Stderr)
	if o.log.quiet {
		hint = io.Discard
	}
	return snapshot.Run(ctx, snapshot.Options{Source: cfg, Out: os.Stdout, Hint: hint, Done: stdinClosed(), LockWaitTimeout: o.lockWait, Logger: o.log.logger()})
}

// stdinClosed returns a channel closed when standard input, if it is a pipe
// or a socket (a coprocess's), reaches end of file. Any other standard input
// is not watched: /dev/null (a background job of a script) would end the
// hold at once, and a terminal would stop a background job that reads it.
func stdinClosed() <-chan struct{} {
	st, err := os.Stdin.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return nil
	}
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	return done
}
