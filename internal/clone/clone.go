// Package clone copies a database to another without an archive: the
// source is read in one exported snapshot exactly as a dump reads it
// (dump.Session), and every chunk streams from a source COPY TO straight
// into a target COPY FROM, uncompressed, while the restore engine's
// scheduler builds indexes and constraints of loaded tables beside the
// copying of others.
package clone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/preflight"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/subset"
)

// Options configure one clone.
type Options struct {
	Source *pgx.ConnConfig
	Target *pgx.ConnConfig
	// Jobs is the number of target connections, and so of chunks copied at
	// once (each with its own source connection).
	Jobs  int
	Clean bool // drop the source's objects from the target first
	// Create creates the source's database on the target server, as
	// restore's Create does: Target names the database to connect to
	// first (clone --all).
	Create bool
	// Settings are how the target is written, as in restore; their
	// NoStatistics also leaves the source's statistics unread.
	restore.Settings
	Split chunk.Options // which tables are copied in several chunks
	// Filter selects schemas and tables as restore's -n/-N/-t/-T do (the
	// source is read whole, in the sense that the schema and the plan
	// cover every table, but only the selected tables' rows are copied):
	// a table comes with its indexes, constraints and, if the target lacks
	// it, its schema. With DataOnly the rows go into existing, empty
	// tables of the target; with SchemaOnly no rows are copied.
	Filter  filter.Options
	Version string
	// LockWaitTimeout is dump.SessionOptions.LockWaitTimeout.
	LockWaitTimeout string
	// TextCopy copies every table in COPY's text format, even between
	// servers of one major version, where tables of built-in types
	// otherwise go in binary (less CPU on both servers).
	TextCopy bool
	// Snapshot is a snapshot exported and held by another process
	// (pgsprint snapshot): the source is read in it instead of in one the
	// clone exports, so that a killed clone can be finished at the same
	// instant of the source.
	Snapshot string
	// SerializableDeferrable is dump.SessionOptions.SerializableDeferrable.
	SerializableDeferrable bool
	// KeepGoing is restore.Options.KeepGoing: Run then returns its
	// Result with the restore's IncompleteError.
	KeepGoing bool
	// Resume finishes a clone in Snapshot that was interrupted, even
	// killed: the plan it saved in the target's journal is reused and the
	// steps it finished are skipped. Without a journal in the target it is
	// an ordinary clone. It requires Snapshot: a new snapshot would mix the
	// rows of two instants.
	Resume bool
	Logger *slog.Logger
	// Progress hears about the work as it happens; nil reports nowhere.
	Progress progress.Reporter
	// Programs finds pg_dump, pg_restore and psql, looking once for clone
	// --all, which clones many databases; nil looks each time.
	Programs *pgbin.Finder
	// Locks is dump.SessionOptions.Locks: the source server's lock table,
	// shared with the other databases clone --all copies at once.
	Locks *dump.LockBudget
	// Subset copies a development copy's rows only (dump.SessionOptions.Subset).
	Subset subset.Spec
	// Mask masks the columns its rules name as they are read
	// (dump.SessionOptions.Mask).
	Mask mask.Spec
}

// Run clones the source database into the target, which must hold no
// object anyone created unless Clean (the restore engine checks), and must
// not be the source (ErrSameDatabase). The result is the restore engine's,
// phases included.
func Run(ctx context.Context, opts Options) (*restore.Result, error) {
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	if opts.Resume && opts.Snapshot == "" {
		return nil, errors.New("clone: resuming needs the snapshot the interrupted clone read")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var saved *archive.Manifest
	if opts.Resume {
		var err error
		if saved, err = journal.ReadManifest(ctx, opts.Target); err != nil {
			return nil, err
		}
		if saved != nil && saved.Snapshot != opts.Snapshot {
			return nil, fmt.Errorf("target database %q holds an unfinished clone of snapshot %s, not %s: resume it with --snapshot %s while that snapshot is held, or start over with --clean without --resume",
				opts.Target.Database, saved.Snapshot, opts.Snapshot, saved.Snapshot)
		}
	}
	// Binary COPY between servers of one major version: ask the target's.
	target, err := pg.Connect(ctx, opts.Target)
	if err != nil {
		return nil, err
	}
	dst, err := pg.ReadServer(ctx, target)
	if err == nil {
		err = preflight.DistinctDatabases(ctx, opts.Source, target)
	}
	target.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	binaryFor := dst.Major()
	if opts.TextCopy || opts.Filter.DataOnly {
		// --data-only loads into tables the source did not define: text
		// lets the target convert (timestamp into timestamptz, int into
		// bigint), where binary would fail or, worse, not.
		binaryFor = 0
	}
	// The selection is made on the target side (restore), from the
	// source's whole list; what pg_dump alone can leave out is left out
	// there.
	f := opts.Filter
	dumped := filter.Options{Selection: filter.Selection{Extensions: f.Extensions, ExcludeExtensions: f.ExcludeExtensions,
		NoUnloggedTableData: f.NoUnloggedTableData, ExcludeLargeObjects: f.ExcludeLargeObjects && !f.IncludeLargeObjects}, Objects: f.Objects}
	sess, err := dump.Begin(ctx, dump.SessionOptions{EarlySchema: true, BinaryForMajor: binaryFor, Source: opts.Source, Jobs: opts.Jobs, BlockSize: pipeBlock, Filter: dumped,
		Split: opts.Split, Version: opts.Version, Snapshot: opts.Snapshot, SerializableDeferrable: opts.SerializableDeferrable, Manifest: saved, LockWaitTimeout: opts.LockWaitTimeout, Logger: opts.Logger,
		NoStatistics: opts.NoStatistics, Programs: opts.Programs, Locks: opts.Locks, Subset: opts.Subset, Mask: opts.Mask})
	if err != nil {
		return nil, explainSnapshot(err, opts)
	}
	defer sess.Close(ctx)
	if opts.Filter, err = sess.ExpandFilter(ctx, opts.Filter); err != nil {
		return nil, err
	}
	logCopyFormats(opts.Logger, sess.Manifest)
	src := newLiveSource(ctx, sess)
	defer src.close()
	res, err := restore.Run(ctx, src, restore.Options{
		Target: opts.Target, From: fmt.Sprintf("the source database %q", opts.Source.Database), SaveManifest: true, Jobs: opts.Jobs, Clean: opts.Clean, Create: opts.Create, Settings: opts.Settings,
		Resume: opts.Resume, Filter: opts.Filter, Logger: opts.Logger, Progress: opts.Progress, Programs: opts.Programs,
		KeepGoing: opts.KeepGoing,
	})
	var incomplete *restore.IncompleteError
	if errors.As(err, &incomplete) && res != nil {
		return res, err
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("clone interrupted: %w", context.Cause(ctx))
		}
		// A source read that met another session's DDL, or a table
		// changed since the snapshot, fails the target's COPY with its
		// message inside the server's: say it plainly.
		var conflict *pg.LockConflictError
		if errors.As(src.failure(), &conflict) {
			return nil, conflict
		}
		var changed *dump.ChangedError
		if errors.As(src.failure(), &changed) {
			return nil, changed
		}
		return nil, explainSnapshot(err, opts)
	}
	return res, nil
}

// explainSnapshot turns the failure to import a held snapshot, by the
// leader or by any reader, into what the user must do: the process that
// holds it is the one thing pgsprint cannot restart.
func explainSnapshot(err error, opts Options) error {
	if opts.Snapshot == "" || !errors.Is(err, pg.ErrSnapshotNotFound) {
		return err
	}
	if opts.Resume {
		return fmt.Errorf("snapshot %s no longer exists: the `pgsprint snapshot` process holding it has ended; start over without --resume (with --clean and a new snapshot)", opts.Snapshot)
	}
	return fmt.Errorf("snapshot %s does not exist: the `pgsprint snapshot` process that printed it has ended (it must run until the clone is done), or it was taken on another server", opts.Snapshot)
}

// logCopyFormats says how many tables go in binary and how many in text.
func logCopyFormats(log *slog.Logger, m *archive.Manifest) {
	if log == nil {
		return
	}
	binary := map[int]bool{}
	for _, c := range m.Chunks {
		if c.Binary {
			binary[c.Table] = true
		}
	}
	log.Info("copy formats", "binary tables", len(binary), "text tables", len(m.Tables)-len(binary))
}
