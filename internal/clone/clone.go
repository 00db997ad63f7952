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

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// Options configure one clone: the restore of the source into the target
// (restore.Options, whose meanings a clone keeps), and how the source is
// read (Session).
type Options struct {
	// Options are the target's side, as restore takes them: Target, Jobs
	// (target connections, and so chunks copied at once, each with its own
	// source connection), Clean (drop the source's objects from the target
	// first), Create (create the source's database on the target server,
	// Target naming the database to connect to first: clone --all),
	// Settings (their NoStatistics also leaves the source's statistics
	// unread), Resume, Logger, Progress, Programs (looked for once by
	// clone --all, which clones many databases; nil looks each time).
	// Filter selects schemas and tables as restore's -n/-N/-t/-T do (the
	// source is read whole, in the sense that the schema and the plan
	// cover every table, but only the selected tables' rows are copied):
	// a table comes with its indexes, constraints and, if the target lacks
	// it, its schema. With DataOnly the rows go into existing, empty
	// tables of the target; with SchemaOnly no rows are copied. Resume
	// finishes a clone in Session.Snapshot that was interrupted, even
	// killed: the plan it saved in the target's journal is reused and the
	// steps it finished are skipped. Without a journal in the target it is
	// an ordinary clone. It requires Session.Snapshot: a new snapshot
	// would mix the rows of two instants. From and SaveManifest are the
	// clone's to set.
	restore.Options
	// Session is the source's side, as a dump reads it: Source, Split,
	// Version, Snapshot (one exported and held by another process,
	// pgsprint snapshot, so that a killed clone can be finished at the
	// same instant of the source), SerializableDeferrable,
	// LockWaitTimeout, Locks (the source server's lock table, shared with
	// the other databases clone --all copies at once), Subset and Mask.
	// Jobs, Filter, NoStatistics, Programs and Logger are taken from the
	// restore's side; BlockSize, EarlySchema, BinaryForMajor and Manifest
	// are the clone's to set.
	Session dump.SessionOptions
	// TextCopy copies every table in COPY's text format, even between
	// servers of one major version, where tables of built-in types
	// otherwise go in binary (less CPU on both servers).
	TextCopy bool
}

// Run clones the source database into the target, which must hold no
// object anyone created unless Clean (the restore engine checks), and must
// not be the source (ErrSameDatabase). The result is the restore engine's,
// phases included.
func Run(ctx context.Context, opts Options) (*restore.Result, error) {
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	if opts.Resume && opts.Session.Snapshot == "" {
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
		if saved != nil && saved.Snapshot != opts.Session.Snapshot {
			return nil, fmt.Errorf("target database %q holds an unfinished clone of snapshot %s, not %s: resume it with --snapshot %s while that snapshot is held, or start over with --clean without --resume",
				opts.Target.Database, saved.Snapshot, opts.Session.Snapshot, saved.Snapshot)
		}
	}
	// Binary COPY between servers of one major version: ask the target's.
	target, err := pg.Connect(ctx, opts.Target)
	if err != nil {
		return nil, err
	}
	dst, err := pg.ReadServer(ctx, target)
	if err == nil {
		err = DistinctDatabases(ctx, opts.Session.Source, target)
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
	so := sessionOptions(opts)
	so.EarlySchema, so.BinaryForMajor, so.BlockSize, so.Manifest = true, binaryFor, pipeBlock, saved
	sess, err := dump.Begin(ctx, so)
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
	ro := opts.Options
	ro.From, ro.SaveManifest = fmt.Sprintf("the source database %q", opts.Session.Source.Database), true
	res, err := restore.Run(ctx, src, ro)
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

// sessionOptions are the source's side of a clone with opts: the
// selection is made on the target side (restore), from the source's whole
// list; what pg_dump alone can leave out is left out there.
func sessionOptions(opts Options) dump.SessionOptions {
	f := opts.Filter
	dumped := filter.Options{Selection: filter.Selection{Extensions: f.Extensions, ExcludeExtensions: f.ExcludeExtensions,
		NoUnloggedTableData: f.NoUnloggedTableData, ExcludeLargeObjects: f.ExcludeLargeObjects && !f.IncludeLargeObjects}, Objects: f.Objects}
	so := opts.Session
	so.Jobs, so.Filter, so.NoStatistics, so.Programs, so.Logger = opts.Jobs, dumped, opts.NoStatistics, opts.Programs, opts.Logger
	return so
}

// explainSnapshot turns the failure to import a held snapshot, by the
// leader or by any reader, into what the user must do: the process that
// holds it is the one thing pgsprint cannot restart.
func explainSnapshot(err error, opts Options) error {
	if opts.Session.Snapshot == "" || !errors.Is(err, pg.ErrSnapshotNotFound) {
		return err
	}
	if opts.Resume {
		return fmt.Errorf("snapshot %s no longer exists: the `pgsprint snapshot` process holding it has ended; start over without --resume (with --clean and a new snapshot)", opts.Session.Snapshot)
	}
	return fmt.Errorf("snapshot %s does not exist: the `pgsprint snapshot` process that printed it has ended (it must run until the clone is done), or it was taken on another server", opts.Session.Snapshot)
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
