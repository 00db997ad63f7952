package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// subscribe hands the clone over to the target's own logical replication:
// it releases the exported snapshot (the clone has read everything) and
// creates, on the target, a subscription on the slot that copies nothing
// and starts at once, through the connection string start settled on;
// the subscription's comment names the source.
//
// If the subscription cannot be created, the slot and publication are
// kept (the clone is complete, and the slot holds every change since):
// the error says how to create the subscription by hand or abort.
func (s *Started) subscribe(ctx context.Context, dst *pgx.ConnConfig) error {
	s.release(ctx)
	conn, err := pg.Connect(ctx, dst)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// The clone read the source's schema after the publication was
	// created: the target has a copy, which is not the user's.
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pg.Ident(s.Publication)); err != nil {
		return fmt.Errorf("drop the copy of publication %s on the target: %w", s.Publication, err)
	}
	create := "CREATE SUBSCRIPTION " + pg.Ident(s.Slot) + " CONNECTION %s PUBLICATION " + pg.Ident(s.Publication) +
		" WITH (copy_data = false, create_slot = false, slot_name = " + pg.Literal(s.Slot) + ", enabled = true)"
	if _, err := conn.Exec(ctx, fmt.Sprintf(create, pg.Literal(s.conninfo))); err != nil {
		return fmt.Errorf("create subscription %s on the target: %w; the clone is complete and slot %s and publication %s are kept on the source (the slot holds WAL): create the subscription on the target yourself with a connection string its server can use: %s, or remove them: pgsprint follow abort",
			s.Slot, err, s.Slot, s.Publication, fmt.Sprintf(create, "'...'"))
	}
	if _, err := conn.Exec(ctx, "COMMENT ON SUBSCRIPTION "+pg.Ident(s.Slot)+" IS "+
		pg.Literal(fmt.Sprintf("%s: slot %s, publication %s on %s", commentPrefix, s.Slot, s.Publication, pg.Describe(s.src)))); err != nil {
		return fmt.Errorf("comment on subscription %s: %w", s.Slot, err)
	}
	return nil
}

// FinishOptions configure Finish.
type FinishOptions struct {
	Source, Target *pgx.ConnConfig
	Names          Names
	// Timeout bounds the wait for the target to catch up.
	Timeout time.Duration
	Logger  *slog.Logger
}

// FinishResult says what Finish did.
type FinishResult struct {
	// Followed is false when no subscription was found: an earlier
	// finish dropped it, and this one only completed the rest.
	Followed bool
	// CaughtUp is the source's WAL position the target applied.
	CaughtUp  string
	Sequences int
	// SourceMajor and TargetMajor are the servers' major versions: a
	// schema comparison across versions must allow for what each prints
	// differently (compare.NormalizeAcrossVersions).
	SourceMajor, TargetMajor int
}

// Finish ends a follow whose source no longer changes: it waits until the
// target has applied every change up to the source's current WAL
// position, copies every sequence's value, and drops the subscription,
// the slot and the publication. Every step is idempotent, so an
// interrupted Finish can be run again. Comparing the databases is the
// caller's last step.
func Finish(ctx context.Context, o FinishOptions) (*FinishResult, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dconn, err := pg.Connect(ctx, o.Target)
	if err != nil {
		return nil, err
	}
	defer dconn.Close(context.WithoutCancel(ctx))
	sconn, err := pg.Connect(ctx, o.Source)
	if err != nil {
		return nil, err
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	sub, err := readSubscription(ctx, dconn, o.Names.Slot)
	if err != nil {
		return nil, err
	}
	res := &FinishResult{Followed: sub != nil}
	for _, side := range []struct {
		conn  *pgx.Conn
		major *int
	}{{sconn, &res.SourceMajor}, {dconn, &res.TargetMajor}} {
		srv, err := pg.ReadServer(ctx, side.conn)
		if err != nil {
			return nil, err
		}
		*side.major = srv.Major()
	}
	if sub != nil {
		if !sub.Enabled {
			log.Warn("subscription was disabled: enabling it to catch up", "subscription", o.Names.Slot)
			if _, err := dconn.Exec(ctx, "ALTER SUBSCRIPTION "+pg.Ident(o.Names.Slot)+" ENABLE"); err != nil {
				return nil, fmt.Errorf("enable subscription %s on the target: %w", o.Names.Slot, err)
			}
		}
		if res.CaughtUp, err = waitCaughtUp(ctx, sconn, o.Names.Slot, o.Timeout, log); err != nil {
			return nil, err
		}
	} else {
		log.Warn("no subscription on the target: an earlier finish dropped it; completing the other steps", "subscription", o.Names.Slot)
	}
	if res.Sequences, err = copySequences(ctx, sconn, dconn); err != nil {
		return nil, err
	}
	if err := dropAll(ctx, sconn, dconn, o.Names, sub != nil); err != nil {
		return nil, err
	}
	return res, nil
}

// waitCaughtUp reads the source's current WAL position and waits until
// the slot's confirmed position, which the target's apply worker
// advances as it applies, reaches it.
func waitCaughtUp(ctx context.Context, sconn *pgx.Conn, slot string, timeout time.Duration, log *slog.Logger) (string, error) {
	// The target is the end of the last record inserted: every commit
	// is before it. pg_current_wal_lsn() will not do: it is where WAL
	// was written up to, which may be inside a record the walsender
	// cannot decode, and so never confirm, until the rest is flushed.
	// Then a commit of our own with synchronous_commit on flushes
	// everything up to the target, which asynchronous commits (and
	// the records after them) may otherwise leave in memory for long.
	var target string
	if err := sconn.QueryRow(ctx, "SELECT pg_catalog.pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return "", fmt.Errorf("read the source's WAL position: %w", err)
	}
	for _, q := range []string{"SET synchronous_commit = on", "SELECT pg_catalog.txid_current()"} {
		if _, err := sconn.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("flush the source's WAL: %w", err)
		}
	}
	deadline := time.Now().Add(timeout)
	lastLog := time.Now()
	for {
		var done bool
		var behind int64
		err := sconn.QueryRow(ctx, `SELECT confirmed_flush_lsn >= $2::pg_lsn,
			greatest(pg_catalog.pg_wal_lsn_diff($2::pg_lsn, confirmed_flush_lsn), 0)::int8
			FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot, target).Scan(&done, &behind)
		if err == pgx.ErrNoRows {
			return "", fmt.Errorf("slot %s is gone from the source while the subscription remains: the target cannot have caught up; run pgsprint follow abort and clone again", slot)
		}
		if err != nil {
			return "", fmt.Errorf("read slot %s on the source: %w", slot, err)
		}
		if done {
			return target, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the target has not caught up with the source's WAL position %s within %s (%d bytes behind): see pgsprint follow status for apply errors, and make sure nothing writes to the source", target, timeout, behind)
		}
		if time.Since(lastLog) > 2*time.Second {
			log.Info("follow: waiting for the target to catch up", "bytes behind", behind, "source position", target)
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// copySequences sets every target sequence to its source value: logical
// replication does not carry sequences.
func copySequences(ctx context.Context, sconn, dconn *pgx.Conn) (int, error) {
	seqs, err := pg.ListSequences(ctx, sconn)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range seqs {
		q := pg.Qualified(s.Schema, s.Name)
		tag, err := dconn.Exec(ctx, `SELECT pg_catalog.setval(c.oid, $2, $3) FROM pg_catalog.pg_class c
			WHERE c.oid = pg_catalog.to_regclass($1) AND c.relkind = 'S'`, q, s.LastValue, s.IsCalled)
		if err != nil {
			return n, fmt.Errorf("set sequence %s on the target: %w", q, err)
		}
		n += int(tag.RowsAffected())
	}
	return n, nil
}

// Abort drops the subscription on the target and the slot and the
// publication on the source, whichever exist.
func Abort(ctx context.Context, src, dst *pgx.ConnConfig, n Names) error {
	dconn, err := pg.Connect(ctx, dst)
	if err != nil {
		return err
	}
	defer dconn.Close(context.WithoutCancel(ctx))
	sconn, err := pg.Connect(ctx, src)
	if err != nil {
		return err
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	sub, err := readSubscription(ctx, dconn, n.Slot)
	if err != nil {
		return err
	}
	return dropAll(ctx, sconn, dconn, n, sub != nil)
}

// dropAll drops the subscription (if sub), the slot and the publication.
// DROP SUBSCRIPTION drops the slot through the target's connection to the
// source; when the target cannot reach the source, the subscription is
// detached from the slot first and the slot dropped from here.
func dropAll(ctx context.Context, sconn, dconn *pgx.Conn, n Names, sub bool) error {
	if sub {
		name := pg.Ident(n.Slot)
		if _, err := dconn.Exec(ctx, "DROP SUBSCRIPTION IF EXISTS "+name); err != nil {
			for _, q := range []string{"ALTER SUBSCRIPTION " + name + " DISABLE",
				"ALTER SUBSCRIPTION " + name + " SET (slot_name = NONE)",
				"DROP SUBSCRIPTION IF EXISTS " + name} {
				if _, err2 := dconn.Exec(ctx, q); err2 != nil {
					return fmt.Errorf("drop subscription %s on the target: %w (then: %v)", n.Slot, err, err2)
				}
			}
		}
	}
	var errs []error
	if err := dropSlot(ctx, sconn, n.Slot); err != nil {
		errs = append(errs, err)
	}
	if _, err := sconn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pg.Ident(n.Publication)); err != nil {
		errs = append(errs, fmt.Errorf("drop publication %s on the source: %w", n.Publication, err))
	}
	return errors.Join(errs...)
}
