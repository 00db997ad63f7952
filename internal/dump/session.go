package dump

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/subset"
)

// SessionOptions say what a Session reads and how it lays out the work.
type SessionOptions struct {
	Source    *pgx.ConnConfig
	Jobs      int           // readers that will share the snapshot (recorded as the archive's interleave)
	BlockSize int           // recorded in the manifest
	Split     chunk.Options // which tables are cut into chunks, and how
	Version   string        // pgsprint's version, recorded in the manifest
	// Filter selects schemas and tables as pg_dump's -n/-N/-t/-T do; the
	// same selection goes to pg_dump for the schema.
	Filter filter.Options
	// Snapshot, when set, is imported by the leader instead of exporting a
	// new one: a snapshot exported and held by another process (pgsprint
	// snapshot), so that an interrupted clone can be finished in the very
	// instant it began in.
	Snapshot string
	// SerializableDeferrable exports the snapshot from a SERIALIZABLE READ
	// ONLY DEFERRABLE transaction (pg.ExportSafeSnapshot), as pg_dump
	// --serializable-deferrable; it means nothing with Snapshot, and is
	// ignored on a standby, which cannot run one.
	SerializableDeferrable bool
	// Manifest, when set, is used instead of planning one: the plan an
	// earlier, interrupted run in the same Snapshot made (saved in the
	// target's journal). Planning again would not give the same chunks,
	// as relation sizes move under concurrent writes, and the journal's
	// finished steps name the earlier plan's streams. As in a new plan,
	// the leader locks nothing; readers lock and check each table.
	Manifest *archive.Manifest
	// LockWaitTimeout, as pg_dump's --lock-wait-timeout (any value SET
	// lock_timeout takes, e.g. "30s"), fails the start instead of waiting
	// longer for a lock: the leader's, while it reads the catalog, and
	// pg_dump's (given the same option), which locks every table it
	// dumps. Empty waits as long as it takes.
	LockWaitTimeout string
	// NoStatistics leaves optimizer statistics out of the schema stream,
	// which otherwise carries them when its pg_dump can (18 and later).
	NoStatistics bool
	// Programs finds the PostgreSQL client program to dump the schema
	// with, looking once for a run that opens many sessions (dump --all,
	// clone --all); nil looks each time.
	Programs *pgbin.Finder
	// BinaryForMajor, when it is the source's major version, marks the
	// chunks of tables with only built-in column types Binary (clone
	// passes its target's major; dump leaves it zero: archives are text).
	BinaryForMajor int
	// EarlySchema starts pg_dump --schema-only as soon as the snapshot is
	// exported, beside the catalog queries (earlySchema), for a run that
	// reads one database. A whole-server dump, which begins a session per
	// database before reading any, leaves it off so as not to run a
	// pg_dump per database at once.
	EarlySchema bool
	// Locks, when set, is the lock table of the source server shared with
	// the run's other sessions (dump --all, clone --all): pg_dump starts
	// only once its locks fit beside theirs.
	Locks *LockBudget
	// Subset, when active, narrows the rows read to a development copy's
	// (internal/subset), computed in the snapshot before any is read.
	Subset subset.Spec
	// Mask, when active, masks the columns its rules name as the readers
	// read them (internal/mask), checked against the schema in the
	// snapshot before any row is read. It leaves optimizer statistics out
	// (they hold column values).
	Mask   mask.Spec
	Logger *slog.Logger
}

// Session is one consistent view of the source, shared by dump and clone
// so that both give the same guarantee: the leader connection holds an
// exported snapshot (and no table lock: see readCatalog); the catalog, the
// chunk plan and the manifest are read inside it; readers (OpenReader),
// which lock and check each table before reading it, and pg_dump
// (Schema), which locks every table while it runs, import it. It ends
// with Commit or Close.
type Session struct {
	leader *pgx.Conn
	source *pgx.ConnConfig
	srv    pg.Server
	tools  pgbin.Tools
	snap   *pg.Snapshot
	filter filter.Options
	noStat bool // SessionOptions.NoStatistics
	// lockWait is pg_dump's --lock-wait-timeout, as the user gave it.
	lockWait string
	// Manifest lays out the streams: 0 is the schema, then one per chunk,
	// then one per large object.
	Manifest *archive.Manifest
	sizes    map[uint32]int64
	locks    *LockBudget  // SessionOptions.Locks
	early    *earlySchema // pg_dump started beside the catalog queries; nil on a resumed plan
	// masks is how each masked table's rows are rewritten, by its index
	// in Manifest.Tables (SessionOptions.Mask); nil without masking.
	masks map[int]*mask.TableMask
}

// Begin connects to the source, exports a snapshot (or imports
// opts.Snapshot), lists what it will read and plans the chunks (or takes
// opts.Manifest), leaving no table locked. The caller must Close the session.
func Begin(ctx context.Context, opts SessionOptions) (*Session, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Mask.Active() {
		// pg_dump's statistics carry column values (most common
		// values, histograms): a masked copy must not.
		if opts.Filter.StatisticsOnly {
			return nil, fmt.Errorf("--mask does not take --statistics-only: optimizer statistics hold the original values of the masked columns")
		}
		opts.NoStatistics = true
	}
	leader, err := pg.Connect(ctx, opts.Source)
	if err != nil {
		return nil, err
	}
	s := &Session{leader: leader, source: opts.Source, filter: opts.Filter, lockWait: opts.LockWaitTimeout, noStat: opts.NoStatistics, locks: opts.Locks}
	if err := s.begin(ctx, opts, log); err != nil {
		s.Close(ctx)
		return nil, err
	}
	return s, nil
}

func (s *Session) begin(ctx context.Context, opts SessionOptions, log *slog.Logger) error {
	var err error
	if s.srv, err = pg.ReadServer(ctx, s.leader); err != nil {
		return err
	}
	// The workers and pg_dump connect besides the leader.
	if _, err := pg.ConnectionRoom(ctx, s.leader, opts.Jobs, max(opts.Jobs, 1)+1); err != nil {
		return err
	}
	// pg_dump locks every table: a database whose tables cannot fit the
	// lock table is refused now, not after its schema is read. A run
	// sharing the source (Locks) has pg_dumps take turns instead.
	if opts.Locks == nil && opts.Manifest == nil {
		if err := s.checkLockSlots(ctx, log); err != nil {
			return err
		}
	}
	if s.srv.InRecovery {
		log.Warn("the source is a standby: data of unlogged tables cannot be read there and is skipped (as pg_dump does); their definitions are kept")
	}
	if s.tools, err = opts.Programs.Find(ctx, s.srv.Major()); err != nil {
		return err
	}
	if opts.Snapshot != "" {
		if s.snap, err = importSnapshot(ctx, s.leader, opts.Snapshot); err != nil {
			return err
		}
		log.Info("snapshot imported", "snapshot", s.snap.ID, "server", s.srv.Version, "pg_dump", s.tools.Version)
	} else {
		export := pg.ExportSnapshot
		switch {
		case opts.SerializableDeferrable && s.srv.InRecovery:
			log.Warn("--serializable-deferrable is ignored on a standby, which cannot run a serializable transaction: the snapshot is an ordinary one")
		case opts.SerializableDeferrable:
			log.Info("waiting for a snapshot no running serializable transaction can make anomalous (--serializable-deferrable)")
			export = pg.ExportSafeSnapshot
		}
		if s.snap, err = export(ctx, s.leader); err != nil {
			return err
		}
		log.Info("snapshot exported", "snapshot", s.snap.ID, "server", s.srv.Version, "pg_dump", s.tools.Version)
	}
	if opts.Manifest != nil {
		if opts.Subset.Active() {
			return fmt.Errorf("--subset cannot resume: the subset's rows are chosen anew by each run; run the clone again without --resume")
		}
		if opts.Mask.Active() || opts.Manifest.Mask != nil {
			return fmt.Errorf("a masked clone cannot resume: start it over with --clean, without --resume")
		}
		return s.reuse(opts.Manifest, log)
	}
	if err := s.filter.CheckPgDump(s.tools.Major); err != nil {
		return err
	}
	// --table-and-children and friends name tables as of the snapshot.
	if s.filter, err = s.filter.Expand(ctx, s.leader); err != nil {
		return err
	}
	if err := s.leaveOutJournal(ctx, log); err != nil {
		return err
	}
	opts.Filter = s.filter
	// pg_dump starts before the privilege check, the last thing it needs
	// being the filter: the check is one catalog query over every table
	// (a tenth of a second at 10,000), and a refusal closes the session,
	// which stops pg_dump before Schema could report anything of it.
	if opts.EarlySchema {
		if err := s.startSchema(ctx); err != nil {
			return err
		}
	}
	// A table, sequence or large object the role cannot read would fail
	// the run only when reached: refused now, naming it.
	if err := CanRead(ctx, s.leader, s.filter); err != nil {
		return err
	}
	// The masking is resolved before the catalog is read: a table is
	// never split on a masked key (chunk.Options.Masked).
	var plan *mask.Resolved
	if opts.Mask.Active() {
		if plan, err = mask.Resolve(ctx, s.leader, opts.Mask, dataEncoding(s.srv)); err != nil {
			return err
		}
	}
	split := opts.Split
	split.Jobs = max(opts.Jobs, 1)
	if plan != nil {
		split.Masked = func(t pg.TableInfo, column string) bool { return plan.Masks(t.Schema, t.Name, column) }
	}
	cat, err := readCatalog(ctx, s.leader, s.srv, split, opts.Filter, opts.LockWaitTimeout)
	if err != nil {
		return err
	}
	var rec *archive.Subset
	if opts.Subset.Active() {
		plan, err := subset.Compute(ctx, s.leader, opts.Subset, subset.Options{Server: s.srv, LockWait: opts.LockWaitTimeout, Logger: log})
		if err != nil {
			return err
		}
		rec = plan.Apply(cat.tables, cat.chunks)
		var rows int64
		for _, t := range rec.Tables {
			rows += t.Rows
		}
		log.Info("subset chosen", "tables", len(rec.Tables), "rows", rows)
	}
	// The catalog is not kept: the manifest holds what the run needs,
	// and at 100,000 tables the catalog is tens of MB more.
	s.Manifest, s.sizes = cat.manifest(s.srv, s.snap, s.tools, opts)
	s.Manifest.Subset = rec
	return s.applyMask(plan, log)
}

// dataEncoding is the encoding of the rows the readers get: the
// manifest's DataEncoding, before the manifest exists.
func dataEncoding(srv pg.Server) string {
	return (&archive.Manifest{Encoding: srv.Encoding, CopyEncoding: srv.Encoding}).DataEncoding()
}

// applyMask records the masking (resolved in the snapshot) and prepares each
// masked table's rewriter; masked tables are read as COPY text, which the
// rewriter parses (binary would need every type's decoder).
func (s *Session) applyMask(plan *mask.Resolved, log *slog.Logger) error {
	if plan == nil {
		return nil
	}
	rec := plan.Record()
	s.Manifest.Mask = rec
	s.masks = map[int]*mask.TableMask{}
	for i, t := range s.Manifest.Tables {
		if mt := plan.Table(t.Schema, t.Name, t.Columns); mt != nil {
			s.masks[i] = mt
		}
	}
	for i := range s.Manifest.Chunks {
		if s.masks[s.Manifest.Chunks[i].Table] != nil {
			s.Manifest.Chunks[i].Binary = false
		}
	}
	log.Info("masking", "columns", len(rec.Columns), "tables", len(s.masks))
	return nil
}

// importSnapshot starts the leader's transaction in a snapshot another
// process exported. Its time is when this transaction began: the server
// does not say when the snapshot was exported.
func importSnapshot(ctx context.Context, conn *pgx.Conn, id string) (*pg.Snapshot, error) {
	if err := pg.ImportSnapshot(ctx, conn, id); err != nil {
		return nil, err
	}
	snap := &pg.Snapshot{ID: id}
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.now()").Scan(&snap.Time); err != nil {
		return nil, fmt.Errorf("read snapshot time: %w", err)
	}
	return snap, nil
}

// reuse makes m, planned by an earlier run in the same snapshot, the
// session's manifest. The leader locks nothing, as Begin's: the readers
// lock each table as they read it.
func (s *Session) reuse(m *archive.Manifest, log *slog.Logger) error {
	if m.Snapshot != s.snap.ID {
		return fmt.Errorf("the saved plan was made in snapshot %s, not %s", m.Snapshot, s.snap.ID)
	}
	s.Manifest = m
	s.sizes = make(map[uint32]int64, len(m.Chunks))
	for _, c := range m.Chunks {
		s.sizes[c.Stream] = c.Size
	}
	log.Info("reusing the saved plan", "tables", len(m.Tables), "chunks", len(m.Chunks))
	return nil
}

// ExpandFilter resolves f's table-and-children patterns in the session's
// snapshot (filter.Options.Expand), for a clone that selects on the target
// side from what the session read.
func (s *Session) ExpandFilter(ctx context.Context, f filter.Options) (filter.Options, error) {
	return f.Expand(ctx, s.leader)
}

// Commit ends the snapshot transaction: call it only when every reader
// and pg_dump have finished with the snapshot.
func (s *Session) Commit(ctx context.Context) error {
	if _, err := s.leader.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("end snapshot transaction: %w", err)
	}
	return nil
}

// Close closes the leader connection (ending the snapshot if Commit was
// not called).
func (s *Session) Close(ctx context.Context) {
	if s.early != nil {
		s.early.close()
	}
	s.leader.Close(context.WithoutCancel(ctx))
}

// leaveOutJournal leaves the schema of a restore's or a clone's journal
// (journal.Schema) out of the dump, with a warning: a database that holds
// one is the target of a pgsprint run that has not finished (or was
// killed), so its data may be incomplete, and an archive carrying the
// journal could not be restored (the restore creates its own).
func (s *Session) leaveOutJournal(ctx context.Context, log *slog.Logger) error {
	var found bool
	if err := s.leader.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", journal.Schema).Scan(&found); err != nil {
		return fmt.Errorf("look for a restore journal in the source: %w", err)
	}
	if !found {
		return nil
	}
	log.Warn("the source database holds the journal of an unfinished pgsprint restore or clone (schema "+pg.Ident(journal.Schema)+"): its data may be incomplete (finish that run with --resume for a complete copy); the journal is left out",
		"database", s.source.Database)
	s.filter.ExcludeSchemas = append(s.filter.ExcludeSchemas[:len(s.filter.ExcludeSchemas):len(s.filter.ExcludeSchemas)], journal.Schema)
	return nil
}
