// Package clone copies a database to another without an archive: the
// source is read in one exported snapshot exactly as a dump reads it
// (dump.Session), and every chunk streams from a source COPY TO straight
// into a target COPY FROM, uncompressed, while the restore engine's
// scheduler builds indexes and constraints of loaded tables beside the
// copying of others.
package clone

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/plan"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// Options configure one clone.
type Options struct {
	Source *pgx.ConnConfig
	Target *pgx.ConnConfig
	// Jobs is the number of target connections, and so of chunks copied at
	// once (each with its own source connection).
	Jobs    int
	Clean   bool // drop the source's objects from the target first
	NoOwner bool
	NoACL   bool
	// MaintenanceWorkMem is each target connection's maintenance_work_mem.
	MaintenanceWorkMem string
	NoAnalyze          bool
	Split              plan.Options // which tables are copied in several chunks
	Version            string
	Logger             *slog.Logger
	// Progress hears about the work as it happens; nil reports nowhere.
	Progress progress.Reporter
}

// Run clones the source database into the target, which must have no user
// tables unless Clean. The result is the restore engine's, phases included.
func Run(ctx context.Context, opts Options) (*restore.Result, error) {
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sess, err := dump.Begin(ctx, dump.SessionOptions{Source: opts.Source, Jobs: opts.Jobs, BlockSize: pipeBlock,
		Split: opts.Split, Version: opts.Version, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	defer sess.Close(ctx)
	src := newLiveSource(ctx, sess)
	defer src.close()
	res, err := restore.Run(ctx, restore.Options{
		Target: opts.Target, Source: src, Jobs: opts.Jobs, Clean: opts.Clean, NoOwner: opts.NoOwner, NoACL: opts.NoACL,
		MaintenanceWorkMem: opts.MaintenanceWorkMem, NoAnalyze: opts.NoAnalyze, Logger: opts.Logger,
		Progress: opts.Progress,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("clone interrupted: %w", context.Cause(ctx))
		}
		return nil, err
	}
	return res, nil
}
