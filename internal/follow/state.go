package follow

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// State is what exists of one follow on both sides, as status, finish and
// abort find it.
type State struct {
	Names
	// Sub is the subscription on the target, nil when there is none.
	Sub *Subscription
	// Source is nil when the source was not read.
	Source *SourceState
	// DDL is the DDL run on the source since the clone, as the source's
	// capture says (the target's copy without the source), or the
	// fallback's drift; nil without a subscription.
	DDL *DDL
	// Copying are the subscription's tables the target has not
	// finished copying (new tables finish copies); with sync errors,
	// copies that fail.
	Copying []string
	// TargetCapture: the target holds this follow's DDL capture objects
	// (left by a killed clone or finish when there is no subscription).
	TargetCapture bool
}

// StaleErrors reports whether the apply errors counted on the target are
// from before its apply worker last started: an apply error ends the
// worker, so one that has run for a while (connected to the source, when
// the source was read) has met none since, and the count is history.
func (st *State) StaleErrors() bool {
	s := st.Sub
	if s == nil || s.ApplyErrors <= 0 || !s.Running || s.WorkerStart.IsZero() || time.Since(s.WorkerStart) < staleAfter {
		return false
	}
	return st.Source == nil || st.Source.SlotActive
}

// staleAfter is how long an apply worker must have run for the errors
// counted before it to be history: longer than the launcher's restart
// interval (wal_retrieve_retry_interval, 5s by default) and a retry.
const staleAfter = 15 * time.Second

// Subscription is the target's view of the subscription.
type Subscription struct {
	Enabled bool
	Comment string
	// Running says whether an apply worker runs for it.
	Running bool
	// WorkerStart is when the running apply worker started; zero when
	// unknown.
	WorkerStart  time.Time
	ReceivedLSN  string // empty when no worker runs
	LatestEndLSN string
	// LatestEndTime is when the worker last reported a position to the
	// source; zero when unknown.
	LatestEndTime time.Time
	// ApplyErrors and SyncErrors are pg_stat_subscription_stats' counts
	// (PostgreSQL 15 and later); -1 when the target cannot tell.
	ApplyErrors, SyncErrors int64
	// LastError is the apply worker's last error, quoted from the
	// target's server log when ApplyErrors > 0 and the log can be read.
	LastError string
	// Partial says the follow covers a selection (-t, -n, --filter):
	// finish compares what it followed.
	Partial bool

	origin string // the replication origin, "pg_" and the OID: lastApplyError
}

// SourceState is the source's view: the slot, the publication and the
// WAL position.
type SourceState struct {
	CurrentLSN string
	// Slot is false when the source has no such slot.
	Slot       bool
	SlotActive bool
	// ConfirmedLSN is the position the target confirmed it applied.
	ConfirmedLSN string
	// LagBytes is the WAL from ConfirmedLSN to CurrentLSN.
	LagBytes int64
	// ReplayLag is pg_stat_replication's replay_lag of the walsender
	// serving the slot; negative when unknown (no walsender, or idle).
	ReplayLag   time.Duration
	Publication bool
	// Fence is the source database's write fence.
	Fence Fence
	// Leftovers are other inactive slots named pgsprint_* in the source
	// database: killed clones' slots, which keep WAL on the source.
	Leftovers []string
	// Prepared are the prepared transactions waiting in the source
	// database: finish refuses to fence while any exist.
	Prepared []Prepared
	// Capture: the source holds this follow's DDL capture objects.
	Capture bool
}

// ReadState reads the subscription on the target and, when src is not
// nil, the slot and publication on the source.
func ReadState(ctx context.Context, src, dst *pgx.ConnConfig, n Names) (*State, error) {
	st := &State{Names: n}
	conn, err := pg.Connect(ctx, dst)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if st.Sub, err = readSubscription(ctx, conn, n.Slot); err != nil {
		return nil, err
	}
	if st.Sub != nil {
		if st.Copying, err = copyingTables(ctx, conn, n.Slot); err != nil {
			return nil, err
		}
	} else if st.TargetCapture, err = hasCapture(ctx, conn, n.Slot); err != nil {
		return nil, err
	}
	if src == nil {
		if st.Sub != nil {
			st.DDL, err = followDDL(ctx, nil, conn, n, st.Sub.Partial)
		}
		return st, err
	}
	sconn, err := pg.Connect(ctx, src)
	if err != nil {
		return nil, err
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	if st.Source, err = readSource(ctx, sconn, n); err != nil {
		return nil, err
	}
	if st.Sub != nil {
		st.DDL, err = followDDL(ctx, sconn, conn, n, st.Sub.Partial)
	}
	return st, err
}

func readSubscription(ctx context.Context, conn *pgx.Conn, name string) (*Subscription, error) {
	var s Subscription
	var pid *int32
	var received, latest *string
	var latestTime, workerStart *time.Time
	err := conn.QueryRow(ctx, `SELECT s.subenabled, coalesce(pg_catalog.obj_description(s.oid, 'pg_subscription'), ''), 'pg_' || s.oid,
		st.pid, st.received_lsn::text, st.latest_end_lsn::text, st.latest_end_time,
		(SELECT a.backend_start FROM pg_catalog.pg_stat_activity a WHERE a.pid = st.pid)
		FROM pg_catalog.pg_subscription s
		LEFT JOIN pg_catalog.pg_stat_subscription st ON st.subid = s.oid AND st.relid IS NULL
		WHERE s.subname = $1 AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		LIMIT 1`, name).Scan(&s.Enabled, &s.Comment, &s.origin, &pid, &received, &latest, &latestTime, &workerStart)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read subscription %s on the target: %w", name, err)
	}
	s.Running = pid != nil
	if received != nil {
		s.ReceivedLSN = *received
	}
	if latest != nil {
		s.LatestEndLSN = *latest
	}
	if latestTime != nil {
		s.LatestEndTime = *latestTime
	}
	if workerStart != nil {
		s.WorkerStart = *workerStart
	}
	s.ApplyErrors, s.SyncErrors = -1, -1
	if srv, err := pg.ReadServer(ctx, conn); err == nil && srv.Major() >= 15 {
		err := conn.QueryRow(ctx, `SELECT apply_error_count, sync_error_count
			FROM pg_catalog.pg_stat_subscription_stats WHERE subname = $1`, name).Scan(&s.ApplyErrors, &s.SyncErrors)
		if err != nil && err != pgx.ErrNoRows {
			return nil, fmt.Errorf("read subscription %s's errors on the target: %w", name, err)
		}
	}
	if s.ApplyErrors > 0 {
		s.LastError = lastApplyError(ctx, conn, s.origin)
	}
	s.Partial = strings.Contains(s.Comment, partialMark)
	return &s, nil
}

func readSource(ctx context.Context, conn *pgx.Conn, n Names) (*SourceState, error) {
	s := &SourceState{ReplayLag: -1}
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.pg_current_wal_lsn()::text,
		EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = $1)`, n.Publication).Scan(&s.CurrentLSN, &s.Publication); err != nil {
		return nil, fmt.Errorf("read the source's WAL position: %w", err)
	}
	var confirmed *string
	var lag *int64
	var replay *float64
	err := conn.QueryRow(ctx, `SELECT s.active, s.confirmed_flush_lsn::text,
		pg_catalog.pg_wal_lsn_diff($2::pg_lsn, s.confirmed_flush_lsn)::int8,
		(SELECT extract(epoch FROM r.replay_lag)::float8 FROM pg_catalog.pg_stat_replication r WHERE r.pid = s.active_pid)
		FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = $1`, n.Slot, s.CurrentLSN).Scan(&s.SlotActive, &confirmed, &lag, &replay)
	switch {
	case err == pgx.ErrNoRows:
	case err != nil:
		return nil, fmt.Errorf("read slot %s on the source: %w", n.Slot, err)
	default:
		s.Slot = true
		if confirmed != nil {
			s.ConfirmedLSN = *confirmed
		}
		if lag != nil {
			s.LagBytes = max(*lag, 0)
		}
		if replay != nil {
			s.ReplayLag = time.Duration(*replay * float64(time.Second))
		}
	}
	if s.Fence, err = readFence(ctx, conn); err != nil {
		return nil, err
	}
	if s.Prepared, err = readPrepared(ctx, conn); err != nil {
		return nil, err
	}
	if s.Capture, err = hasCapture(ctx, conn, n.Slot); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT slot_name::text FROM pg_catalog.pg_replication_slots
		WHERE slot_name LIKE 'pgsprint\_%' AND slot_name <> $1 AND NOT active
		AND database = pg_catalog.current_database() ORDER BY 1`, n.Slot)
	if err == nil {
		s.Leftovers, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return nil, fmt.Errorf("list the source's replication slots: %w", err)
	}
	return s, nil
}

// DropSlotSQL is the statement that drops a slot left on the source, for
// messages that tell the user how to free the WAL it holds.
func DropSlotSQL(slot string) string {
	return "SELECT pg_drop_replication_slot(" + pg.Literal(slot) + ")"
}
