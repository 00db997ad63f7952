// Package dump writes a database to one pgsprint archive: one exported
// snapshot, pg_dump for the schema, and table data, sequences and large
// objects read by parallel workers and compressed in them.
package dump

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"filippo.io/age"
	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/store/location"
	"github.com/pgsprint/pgsprint/internal/subset"
)

// Options configure one dump.
type Options struct {
	Source    *pgx.ConnConfig
	File      string    // archive location (store/location): a path, written under a temporary name first; "-" for Stdout
	Stdout    io.Writer // where File "-" writes; nil is os.Stdout
	Jobs      int
	Codec     codec.Codec
	BlockSize int
	// Split says which tables are cut into chunks, and how.
	Split   chunk.Options
	Version string // pgsprint's version, recorded in the manifest
	Logger  *slog.Logger
	// Filter selects schemas and tables as pg_dump's -n/-N/-t/-T do; the
	// same selection goes to pg_dump for the schema.
	Filter filter.Options
	// LockWaitTimeout is SessionOptions.LockWaitTimeout.
	LockWaitTimeout string
	// Snapshot is SessionOptions.Snapshot: read in a snapshot another
	// session exported (pg_dump --snapshot) instead of exporting one.
	Snapshot string
	// SerializableDeferrable is SessionOptions.SerializableDeferrable.
	SerializableDeferrable bool
	// Progress hears about the work as it happens; nil reports nowhere.
	Progress progress.Reporter
	// NoStatistics is SessionOptions.NoStatistics.
	NoStatistics bool
	// Programs is SessionOptions.Programs.
	Programs *pgbin.Finder
	// Recipients, when given, encrypt the archive to them (format 3:
	// internal/seal); a clear archive otherwise.
	Recipients []age.Recipient
	// Location says how to reach File when it is in object storage
	// (its In and Out are not used: Stdout is).
	Location location.Options
	// Overwrite replaces an existing s3:// object; a file is always
	// replaced.
	Overwrite bool
	// Subset is SessionOptions.Subset (one database only).
	Subset subset.Spec
	// Mask is SessionOptions.Mask (one database only).
	Mask mask.Spec
}

// WithDefaults is opts with what was left out filled in: one job, the
// default block size, a logger and a progress reporter that discard, a
// Finder of the client programs. A dump of one database and of a whole
// server start from it alike.
func (opts Options) WithDefaults() Options {
	opts.Jobs = max(opts.Jobs, 1)
	if opts.BlockSize <= 0 {
		opts.BlockSize = archive.DefaultBlockSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	if opts.Programs == nil {
		opts.Programs = &pgbin.Finder{}
	}
	return opts
}

// SessionOptions are the options of the session that reads the database
// cfg reaches, said once from opts: a dump of one database and every
// database of a whole-server dump begin theirs alike. Snapshot,
// EarlySchema and Locks are the caller's to add.
func (opts Options) SessionOptions(cfg *pgx.ConnConfig) SessionOptions {
	return SessionOptions{Source: cfg, Jobs: opts.Jobs, BlockSize: opts.BlockSize, Split: opts.Split, Version: opts.Version,
		Filter: opts.Filter, LockWaitTimeout: opts.LockWaitTimeout, SerializableDeferrable: opts.SerializableDeferrable, NoStatistics: opts.NoStatistics, Programs: opts.Programs, Logger: opts.Logger, Subset: opts.Subset, Mask: opts.Mask}
}

// Result summarises a finished dump.
type Result struct {
	Tables       int
	Chunks       int // table data streams: more than Tables when tables were split
	LargeObjects int
	Sequences    int
	Rows         int64
	RawBytes     int64
	StoredBytes  int64
	Elapsed      time.Duration
}

// Run dumps the source database into opts.File. On any error nothing new
// is visible there (a partial file is removed; a stream lacks its
// trailer): what is at opts.File is always a complete archive.
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	opts = opts.WithDefaults()
	opts.Progress.Phase("catalog")

	so := opts.SessionOptions(opts.Source)
	so.EarlySchema, so.Snapshot = true, opts.Snapshot
	sess, err := Begin(ctx, so)
	if err != nil {
		return nil, err
	}
	defer sess.Close(ctx)
	m := sess.Manifest
	planned := sess.Plan()
	opts.Progress.Begin(planned)
	opts.Progress.Phase("data")

	a, err := CreateArchive(ctx, opts, m, planned)
	if err != nil {
		return nil, err
	}
	defer a.Abort()

	wr, err := Write(ctx, opts, a, Sessions{List: []*Session{sess}, Units: sess.Units()})
	if err != nil {
		return nil, err
	}
	return &Result{Tables: len(m.Tables), Chunks: len(m.Chunks), LargeObjects: len(m.LargeObjects), Sequences: len(m.Sequences),
		Rows: wr.Rows, RawBytes: wr.RawBytes, StoredBytes: wr.StoredBytes, Elapsed: time.Since(start)}, nil
}

// checkSpace refuses a dump into a local file whose file system cannot
// hold the archive estimated from the planned bytes (DiskSpace),
// and warns when it may not. CreateArchive runs it, for a dump of one
// database and of a whole server alike.
func checkSpace(opts Options, planned progress.Expected) error {
	if opts.File == "-" || opts.File == "" || location.IsURL(opts.File) {
		return nil
	}
	dir := DirOf(opts.File)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil // creating the archive says what is wrong with dir
	}
	warning, detail, err := DiskSpace(dir, ArchiveEstimate(planned.Bytes, opts.Codec == nil || opts.Codec.Name() != "none"), "the archive")
	if warning {
		opts.Logger.Warn(detail)
	}
	return err
}

// Plan is the work a dump of the session expects, from the catalog's
// estimates: what a dump of one database shows and sizes its output by,
// and, summed (PlanAll), a whole-server dump.
func (s *Session) Plan() progress.Expected { return planOf(s.Manifest) }

// PlanAll is the work a dump of every session expects: their plans
// summed, for a whole-server dump, whose one archive holds them all.
func PlanAll(sessions []*Session) progress.Expected {
	p := progress.Expected{Op: "dump", Estimated: true}
	for _, s := range sessions {
		sp := s.Plan()
		p.Tables += sp.Tables
		p.Chunks += sp.Chunks
		p.Bytes += sp.Bytes
		p.Rows += sp.Rows
	}
	return p
}

// planOf is the work a dump expects, from the catalog's estimates.
func planOf(m *archive.Manifest) progress.Expected {
	p := progress.Expected{Op: "dump", Tables: len(m.Tables), Chunks: len(m.Chunks) + len(m.LargeObjects), Estimated: true}
	// The chunks' estimates (Done.Planned), whose sum the tracker
	// replaces unit by unit with what they moved.
	for _, c := range m.Chunks {
		p.Bytes += c.Size
	}
	for _, t := range m.Tables {
		p.Rows += t.Rows
	}
	for _, lo := range m.LargeObjects {
		p.Bytes += lo.Size
	}
	return p
}
