// Package snapshot exports a snapshot of a database and keeps it alive for
// other processes: clone --snapshot reads in it, and a killed clone can be
// resumed in the very same instant of the source, which a snapshot held by
// the clone itself would not allow (it dies with the clone's connection).
package snapshot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// ApplicationName is the holder's application_name, so that a DBA who
// wonders which session holds back VACUUM's horizon sees what it is.
const ApplicationName = "pgsprint snapshot"

// Options configure one holder.
type Options struct {
	Source *pgx.ConnConfig
	// Out receives the snapshot id, one line, once the snapshot is exported
	// and the tables are locked: a script reads it from there.
	Out io.Writer
	// Hint receives a human explanation of what to do next (stderr).
	Hint io.Writer
	// Done, when closed, ends the hold as cancelling ctx does: the caller
	// closes it when its standard input reaches EOF, so that a holder run as
	// a coprocess ends with its parent. Nil never closes.
	Done <-chan struct{}
	// Check is how often the connection is checked, so that a holder whose
	// snapshot is gone (server restart, terminated backend) says so and
	// fails instead of holding nothing (0: every 5 seconds).
	Check time.Duration
	// LockWaitTimeout bounds the wait for each table's lock, as pg_dump's
	// --lock-wait-timeout (empty: as long as it takes).
	LockWaitTimeout string
	Logger          *slog.Logger
}

// Run exports a snapshot, locks every user table in ACCESS SHARE mode, as
// pg_dump -Fc does for its whole run (TRUNCATE and table rewrites are not MVCC-safe: an
// old snapshot would read a truncated or rewritten table as empty, so they
// must wait until the holder ends), prints the snapshot id and holds both
// until ctx is cancelled or opts.Done is closed, which is a success. It
// fails if the connection is lost meanwhile.
func Run(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Hint == nil {
		opts.Hint = io.Discard
	}
	every := opts.Check
	if every <= 0 {
		every = 5 * time.Second
	}
	cfg := opts.Source.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, set := cfg.RuntimeParams["application_name"]; !set {
		cfg.RuntimeParams["application_name"] = ApplicationName
	}
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	srv, err := pg.ReadServer(ctx, conn)
	if err != nil {
		return err
	}
	snap, err := pg.ExportSnapshot(ctx, conn)
	if err != nil {
		return err
	}
	done, err := pg.LimitLockWait(ctx, conn, opts.LockWaitTimeout)
	if err != nil {
		return err
	}
	tables, err := pg.ListTables(ctx, conn, srv)
	if err == nil {
		err = pg.LockTables(ctx, conn, tables)
	}
	if err := done(err); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(opts.Out, snap.ID); err != nil {
		return fmt.Errorf("write the snapshot id: %w", err)
	}
	log.Info("snapshot exported", "snapshot", snap.ID, "tables locked", len(tables), "server", srv.Version)
	fmt.Fprintf(opts.Hint, "pgsprint: holding snapshot %s of %s (%d tables locked in ACCESS SHARE mode)\n", snap.ID, pg.Describe(cfg), len(tables))
	fmt.Fprintf(opts.Hint, "pgsprint: clone with --snapshot %s (and --resume after an interruption); end this process (Ctrl-C, SIGTERM or EOF on a piped stdin) when the clone is done\n", snap.ID)

	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-opts.Done:
			return nil
		case <-tick.C:
			if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("snapshot %s is gone: lost the connection holding it (the server restarted or the session was terminated): %w", snap.ID, err)
			}
		}
	}
}
