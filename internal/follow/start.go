package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// Options configure a follow (Clone): the source side, created before the
// clone reads the source, and the subscription on the target after it.
type Options struct {
	Source *pgx.ConnConfig
	Target *pgx.ConnConfig
	Names  Names
	// Conninfo is how the target server reaches the source, stored in
	// the subscription: checked before anything is copied. Empty: the
	// source's host, port, user and database (pg.Conninfo), refused with
	// ErrConninfoPassword when the source connection uses a password.
	Conninfo string
	// Filter is the clone's selection: the publication holds the tables
	// whose rows the clone copies.
	Filter filter.Options
	// ReplicaIdentityFull sets REPLICA IDENTITY FULL on the source's
	// tables that have neither a primary key nor a replica identity,
	// instead of refusing them: once published, their UPDATE and DELETE
	// would fail on the source.
	ReplicaIdentityFull bool
	// SkipNoKey leaves such tables out of the publication instead: their
	// changes are not followed.
	SkipNoKey bool
	Logger    *slog.Logger
}

// Started is a publication and a slot created on the source, and the
// replication connection that holds the slot's exported snapshot.
type Started struct {
	Names
	// Snapshot is the slot's exported snapshot: the clone reads in it.
	Snapshot string
	// ConsistentPoint is the WAL position the slot's changes start at.
	ConsistentPoint string
	// Identity lists the tables set to REPLICA IDENTITY FULL.
	Identity []string

	partial  bool // the clone copies a selection (Options.Filter)
	filter   filter.Options
	capture  bool   // DDL is captured on the source and replayed on the target
	conninfo string // how the target server reaches the source
	src      *pgx.ConnConfig
	repl     *pgconn.PgConn
	log      *slog.Logger
}

// start checks every requirement, then creates the publication and the
// slot with an exported snapshot. The snapshot lives while the replication
// connection stays open and idle: call release once the clone has read
// everything, cancel to remove what start created.
func start(ctx context.Context, o Options) (*Started, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Conninfo == "" {
		if o.Source.Password != "" {
			return nil, ErrConninfoPassword
		}
		o.Conninfo = pg.Conninfo(o.Source)
	}
	target, err := readTarget(ctx, o.Target, o.Names)
	if err != nil {
		return nil, err
	}
	conn, err := pg.Connect(ctx, o.Source)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	req, err := ReadSourceSettings(ctx, conn, o.Names.Slot, o.Names.Publication)
	if err != nil {
		return nil, err
	}
	if err := verdict.Failed(req.Requirements()); err != nil {
		return nil, err
	}
	if o.Filter, err = withPartitions(ctx, conn, o.Filter); err != nil {
		return nil, err
	}
	tables, err := SourceTables(ctx, conn, o.Filter)
	if err != nil {
		return nil, err
	}
	pub, keyless, err := o.choose(req, tables, log)
	if err != nil {
		return nil, err
	}
	// Tables whose rows the target finds by every column: those already
	// REPLICA IDENTITY FULL, and the keyless ones under the option.
	var full []string
	if o.ReplicaIdentityFull {
		full = append(full, keyless...)
	}
	for _, t := range tables {
		if t.Full && t.Logged {
			full = append(full, t.Name)
		}
	}
	cols, err := noEquality(ctx, conn, full)
	if err != nil {
		return nil, err
	}
	if len(cols) > 0 {
		return nil, fmt.Errorf("tables followed with REPLICA IDENTITY FULL (set by --replica-identity-full, or already): the target finds the row an UPDATE or DELETE changes by comparing every column, and these columns' types have no equality operator: %s; give those tables a primary key (or a REPLICA IDENTITY USING INDEX), or use --follow-skip-no-key (their changes are not followed)",
			pg.Shorten(strings.Join(cols, ", "), 300))
	}
	if err := probeReach(ctx, conn, o.Target, o.Names, o.Conninfo); err != nil {
		return nil, err
	}
	s := &Started{Names: o.Names, partial: o.Filter.Active(), filter: o.Filter, conninfo: o.Conninfo, src: o.Source, log: log}
	// DDL is captured when it can be replayed: event triggers need a
	// superuser on the source, and the target holds the same objects.
	s.capture = req.Superuser && target.Superuser
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if o.ReplicaIdentityFull {
			for _, t := range keyless {
				if _, err := tx.Exec(ctx, "ALTER TABLE "+t+" REPLICA IDENTITY FULL"); err != nil {
					return fmt.Errorf("set REPLICA IDENTITY FULL on %s: %w", t, err)
				}
				log.Warn("source table set to REPLICA IDENTITY FULL: it has no primary key, and its UPDATE and DELETE must be published", "table", t)
			}
		}
		if _, err := tx.Exec(ctx, "CREATE PUBLICATION "+pg.Ident(o.Names.Publication)+" "+pub); err != nil {
			return fmt.Errorf("create publication %s on the source: %w", o.Names.Publication, err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if o.ReplicaIdentityFull {
		s.Identity = keyless
	}
	if err := s.createSlot(ctx); err != nil {
		cleanup := s.cancel(context.WithoutCancel(ctx))
		return nil, errors.Join(err, cleanup)
	}
	// After the slot: the clone, in the slot's snapshot, does not copy
	// the capture; the target gets its own before it subscribes.
	if s.capture {
		if err := installCapture(ctx, conn, s.Names, o.Filter, true, pub == "FOR ALL TABLES"); err != nil {
			cleanup := s.cancel(context.WithoutCancel(ctx))
			return nil, errors.Join(err, cleanup)
		}
	} else {
		log.Warn("DDL on the source during the follow is not replayed on the target: capturing it takes event triggers, which need superuser on the source and the target; follow status --source and follow finish detect it by comparing the followed tables' columns, and stop")
	}
	log.Info("follow: slot created", "slot", s.Slot, "publication", s.Publication, "consistent point", s.ConsistentPoint, "snapshot", s.Snapshot)
	return s, nil
}

// choose returns the publication's table clause and the keyless tables
// (quoted), refusing them unless the options say what to do.
func (o Options) choose(req SourceSettings, tables []SourceTable, log *slog.Logger) (string, []string, error) {
	var keyless, list []string
	skipped := false
	for _, t := range tables {
		switch {
		case !t.Logged:
			log.Warn("changes to an unlogged table are not followed (logical replication cannot read them)", "table", t.Name)
			skipped = true
			continue
		case t.Keyless:
			keyless = append(keyless, t.Name)
			if o.SkipNoKey && !o.ReplicaIdentityFull {
				log.Warn("table without primary key or replica identity left out of the publication: its changes after the clone are NOT followed", "table", t.Name)
				skipped = true
				continue
			}
		}
		// ONLY: a table's inheritance children are published only
		// when selected (then listed); a partitioned table's
		// partitions always are (withPartitions selects them).
		list = append(list, "ONLY "+t.Name)
	}
	if err := Keyless(tables, o.ReplicaIdentityFull, o.SkipNoKey); err != nil {
		return "", nil, err
	}
	if req.Superuser && !o.Filter.Active() && !skipped {
		return "FOR ALL TABLES", keyless, nil
	}
	if len(list) == 0 {
		return "", nil, errors.New("no table of the source to follow")
	}
	return "FOR TABLE " + strings.Join(list, ", "), keyless, nil
}

// createSlot opens the replication connection and creates the slot with
// an exported snapshot on it.
func (s *Started) createSlot(ctx context.Context) error {
	cfg := s.src.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "pgsprint"
	repl, err := pgconn.ConnectConfig(ctx, &cfg.Config)
	if err != nil {
		return &pg.ConnectError{Target: "replication connection to " + pg.Describe(s.src), Err: err}
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, s.Slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT"})
	if err != nil {
		repl.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("create replication slot %s on the source: %w", s.Slot, err)
	}
	s.repl = repl
	s.Snapshot = res.SnapshotName
	s.ConsistentPoint = res.ConsistentPoint
	return nil
}

// release closes the replication connection, and with it the exported
// snapshot: the slot stays. Call it once the clone has read everything.
func (s *Started) release(ctx context.Context) {
	if s.repl != nil {
		s.repl.Close(context.WithoutCancel(ctx))
		s.repl = nil
	}
}

// cancel removes what start created on the source: the slot, the DDL capture, the
// publication, and the REPLICA IDENTITY FULL it set (back to DEFAULT).
func (s *Started) cancel(ctx context.Context) error {
	var errs []error
	slot := s.Slot // emptied once the slot is dropped
	if s.repl != nil {
		// The slot belongs to this connection: dropping it there
		// needs no wait for a walsender to let go of it.
		if err := pglogrepl.DropReplicationSlot(ctx, s.repl, s.Slot, pglogrepl.DropReplicationSlotOptions{}); err == nil {
			s.Slot = ""
		}
		s.release(ctx)
	}
	conn, err := pg.Connect(ctx, s.src)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if s.Slot != "" {
		if err := dropSlot(ctx, conn, s.Slot); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pg.Ident(s.Publication)); err != nil {
		errs = append(errs, fmt.Errorf("drop publication %s on the source: %w", s.Publication, err))
	}
	if err := dropCapture(ctx, conn, slot); err != nil {
		errs = append(errs, err)
	}
	for _, t := range s.Identity {
		if _, err := conn.Exec(ctx, "ALTER TABLE "+t+" REPLICA IDENTITY DEFAULT"); err != nil {
			errs = append(errs, fmt.Errorf("reset replica identity of %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// dropSlot drops a slot of the connection's database if it exists,
// waiting up to 10 seconds for the walsender that uses it to let go (a
// subscription just dropped or disabled, a connection just closed).
func dropSlot(ctx context.Context, conn *pgx.Conn, slot string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := conn.Exec(ctx, `SELECT pg_catalog.pg_drop_replication_slot(slot_name)
			FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) { // object_in_use: active
			if err != nil {
				return fmt.Errorf("drop replication slot %s on the source: %w", slot, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop replication slot %s on the source: %w", slot, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
