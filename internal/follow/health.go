package follow

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// DefaultStallTimeout is how long finish waits, before and after the
// fence, for a catch-up that makes no progress: a fence that waits on an
// apply worker which cannot connect keeps a production database
// read-only for nothing.
const DefaultStallTimeout = 30 * time.Second

// checkHealth is finish's check before the fence: no prepared
// transaction in the source database, no table of the subscription that
// the target fails to copy, and an apply worker connected to the source
// (the slot active) that confirms the source's position as of now. That
// last wait is also a catch-up before the fence, which shortens the one
// under it. It fails with the cause when the confirmed position makes no
// progress for stall, at once when the target counts an apply error
// beyond baseline (-1: it cannot count them), and after timeout in all;
// the source is still writable then.
func checkHealth(ctx context.Context, sconn, dconn *pgx.Conn, n Names, baseline int64, stall, timeout time.Duration) error {
	if err := noPrepared(ctx, sconn); err != nil {
		return err
	}
	if err := failingCopies(ctx, dconn, n.Slot); err != nil {
		return err
	}
	target, err := flushedPosition(ctx, sconn)
	if err != nil {
		return err
	}
	clock, deadline, lastCheck := newStallClock(), time.Now().Add(timeout), time.Now()
	refuse := func(why string) error {
		return fmt.Errorf("%s; the source was not fenced: it is writable, and the target still follows it (pgsprint follow status)", why)
	}
	for {
		var active, done bool
		var confirmed string
		err := sconn.QueryRow(ctx, `SELECT active, coalesce(confirmed_flush_lsn::text, ''), coalesce(confirmed_flush_lsn >= $2::pg_lsn, false)
			FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, n.Slot, target).Scan(&active, &confirmed, &done)
		if err == pgx.ErrNoRows {
			return fmt.Errorf("slot %s is gone from the source while the subscription remains: the target cannot catch up; run pgsprint follow abort and clone again", n.Slot)
		}
		if err != nil {
			return fmt.Errorf("read slot %s on the source: %w", n.Slot, err)
		}
		if active && done {
			return nil
		}
		stalled, err := clock.stalled(ctx, dconn, n.Slot, confirmed, stall)
		if err != nil {
			return err
		}
		if stalled {
			return refuse(fmt.Sprintf("the target's apply worker is not healthy: it confirmed no progress for %s: %s", stall, stallCause(ctx, sconn, dconn, n.Slot)))
		}
		if baseline >= 0 && time.Since(lastCheck) > 250*time.Millisecond {
			lastCheck = time.Now()
			sub, err := readSubscription(ctx, dconn, n.Slot)
			if err != nil {
				return err
			}
			if sub != nil && sub.ApplyErrors > baseline {
				return refuse(fmt.Sprintf("the target's apply worker fails: %s; next: %s", ApplyErrorText(sub), ApplyErrorAdvice(sub.LastError)))
			}
		}
		if time.Now().After(deadline) {
			return refuse(fmt.Sprintf("the target's apply worker is not healthy: it has not caught up with the source's position %s within %s: %s", target, timeout, stallCause(ctx, sconn, dconn, n.Slot)))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// flushedPosition returns the source's position that every commit so
// far is before, once flushed (waitCaughtUp says why both).
func flushedPosition(ctx context.Context, sconn *pgx.Conn) (string, error) {
	var target string
	if err := sconn.QueryRow(ctx, "SELECT pg_catalog.pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return "", fmt.Errorf("read the source's WAL position: %w", err)
	}
	for _, q := range []string{"SET synchronous_commit = on", "SELECT pg_catalog.txid_current()"} {
		if _, err := sconn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("flush the source's WAL: %w", err)
		}
	}
	return target, nil
}

// stallCause says why the target's apply worker does not advance, as far
// as both sides tell: no walsender on the slot, no apply worker, the
// worker's last error in the target's log, apply errors counted.
func stallCause(ctx context.Context, sconn, dconn *pgx.Conn, slot string) string {
	var causes []string
	var active bool
	if err := sconn.QueryRow(ctx, "SELECT active FROM pg_catalog.pg_replication_slots WHERE slot_name = $1", slot).Scan(&active); err == nil && !active {
		causes = append(causes, fmt.Sprintf("slot %s is not in use on the source (the apply worker is not connected to it)", slot))
	}
	sub, err := readSubscription(ctx, dconn, slot)
	switch {
	case err != nil:
		causes = append(causes, err.Error())
	case sub == nil:
		causes = append(causes, fmt.Sprintf("subscription %s is gone from the target", slot))
	default:
		if !sub.Enabled {
			causes = append(causes, fmt.Sprintf("subscription %s is disabled on the target", slot))
		} else if !sub.Running {
			causes = append(causes, "no apply worker runs on the target")
		}
		if e := lastApplyError(ctx, dconn, sub.origin); e != "" {
			causes = append(causes, fmt.Sprintf("the worker's last error in the target's log: %q", e))
		} else if sub.ApplyErrors > 0 {
			causes = append(causes, ApplyErrorText(sub))
		}
	}
	if len(causes) == 0 {
		return "the apply worker is connected but applies nothing (a long transaction or lock on the target? see pgsprint follow status and the target's server log)"
	}
	return strings.Join(causes, "; ")
}

// Prepared is a prepared transaction (PREPARE TRANSACTION) waiting in the
// source database: committed after the fence, its writes would reach the
// source only.
type Prepared struct {
	GID, Owner string
	At         time.Time
}

func (p Prepared) String() string {
	return fmt.Sprintf("%s (owner %s, prepared %s)", pg.Literal(p.GID), p.Owner, p.At.Format(time.RFC3339))
}

// readPrepared lists the prepared transactions of conn's database.
func readPrepared(ctx context.Context, conn *pgx.Conn) ([]Prepared, error) {
	rows, err := conn.Query(ctx, `SELECT gid, owner::text, prepared FROM pg_catalog.pg_prepared_xacts
		WHERE database = pg_catalog.current_database() ORDER BY prepared`)
	if err != nil {
		return nil, fmt.Errorf("list the source's prepared transactions: %w", err)
	}
	p, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Prepared, error) {
		var p Prepared
		return p, r.Scan(&p.GID, &p.Owner, &p.At)
	})
	if err != nil {
		return nil, fmt.Errorf("list the source's prepared transactions: %w", err)
	}
	return p, nil
}

// noPrepared refuses a source database with prepared transactions: the
// fence does not stop COMMIT PREPARED, and ending sessions does not end
// them.
func noPrepared(ctx context.Context, conn *pgx.Conn) error {
	p, err := readPrepared(ctx, conn)
	if err != nil || len(p) == 0 {
		return err
	}
	s := make([]string, len(p))
	for i, x := range p {
		s[i] = x.String()
	}
	return fmt.Errorf("the source database has %d prepared transactions: %s; a COMMIT PREPARED after the fence would write to the source only: COMMIT PREPARED or ROLLBACK PREPARED each first",
		len(p), pg.Shorten(strings.Join(s, ", "), 300))
}

// failingCopies refuses a subscription with tables the target is still
// copying after a failed copy (sync errors): the copy retries forever,
// and a fence would wait on it for nothing.
func failingCopies(ctx context.Context, dconn *pgx.Conn, slot string) error {
	sub, err := readSubscription(ctx, dconn, slot)
	if err != nil || sub == nil || sub.SyncErrors <= 0 {
		return err
	}
	copying, err := copyingTables(ctx, dconn, slot)
	if err != nil || len(copying) == 0 {
		return err
	}
	return fmt.Errorf("the target fails to copy %s (%d sync errors; the error is in the target's server log): fix the cause on the target, or drop the table on the source, then finish again",
		pg.Shorten(strings.Join(copying, ", "), 200), sub.SyncErrors)
}

// copyingTables lists the tables of the subscription that the target has
// not finished copying.
func copyingTables(ctx context.Context, dconn *pgx.Conn, slot string) ([]string, error) {
	t, err := pg.QueryStrings(ctx, dconn, `SELECT pg_catalog.format('%I.%I', ns.nspname, c.relname)
		FROM pg_catalog.pg_subscription_rel r JOIN pg_catalog.pg_subscription s ON s.oid = r.srsubid
		JOIN pg_catalog.pg_class c ON c.oid = r.srrelid JOIN pg_catalog.pg_namespace ns ON ns.oid = c.relnamespace
		WHERE s.subname = $1 AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		AND r.srsubstate NOT IN ('r', 's') ORDER BY 1`, slot)
	if err != nil {
		return nil, fmt.Errorf("read the target's table synchronisation: %w", err)
	}
	return t, nil
}

// applying reports whether the target's apply worker is inside a
// transaction: a large one can take long to apply while the confirmed
// position stays where it was, which is not a stall. It also returns the
// position the worker received up to, which moves while it receives.
func applying(ctx context.Context, dconn *pgx.Conn, slot string) (busy bool, received string, err error) {
	err = dconn.QueryRow(ctx, `SELECT coalesce(bool_or(a.xact_start IS NOT NULL), false), coalesce(max(st.received_lsn)::text, '')
		FROM pg_catalog.pg_stat_subscription st LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = st.pid
		WHERE st.subname = $1 AND st.relid IS NULL`, slot).Scan(&busy, &received)
	if err != nil {
		return false, "", fmt.Errorf("read subscription %s's apply worker on the target: %w", slot, err)
	}
	return busy, received, nil
}

// stallClock tells when a catch-up last made progress: the confirmed
// position moved, the worker received more, or it is applying a
// transaction.
type stallClock struct {
	confirmed, received string
	since               time.Time
	checked             time.Time
}

func newStallClock() *stallClock { return &stallClock{since: time.Now(), checked: time.Now()} }

// stalled reports whether nothing moved for longer than stall, given the
// confirmed position read now; it asks the target about its worker only
// when the position stood still for a second.
func (c *stallClock) stalled(ctx context.Context, dconn *pgx.Conn, slot, confirmed string, stall time.Duration) (bool, error) {
	if confirmed != c.confirmed {
		c.confirmed, c.since = confirmed, time.Now()
		return false, nil
	}
	if time.Since(c.since) < time.Second || time.Since(c.checked) < 250*time.Millisecond {
		return false, nil
	}
	c.checked = time.Now()
	busy, received, err := applying(ctx, dconn, slot)
	if err != nil {
		return false, err
	}
	if busy || received != c.received {
		c.received, c.since = received, time.Now()
		return false, nil
	}
	return time.Since(c.since) > stall, nil
}
