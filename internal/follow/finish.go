package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	if s.capture {
		if err := installCapture(ctx, conn, s.Names, s.filter, false, false); err != nil {
			return fmt.Errorf("%w; the clone is complete and slot %s and publication %s are kept on the source (the slot holds WAL): pgsprint follow abort removes them", err, s.Slot, s.Publication)
		}
	}
	create := "CREATE SUBSCRIPTION " + pg.Ident(s.Slot) + " CONNECTION %s PUBLICATION " + pg.Ident(s.Publication) +
		" WITH (copy_data = false, create_slot = false, slot_name = " + pg.Literal(s.Slot) + ", enabled = true)"
	if _, err := conn.Exec(ctx, fmt.Sprintf(create, pg.Literal(s.conninfo))); err != nil {
		return fmt.Errorf("create subscription %s on the target: %w; the clone is complete and slot %s and publication %s are kept on the source (the slot holds WAL): create the subscription on the target yourself with a connection string its server can use: %s, or remove them: pgsprint follow abort",
			s.Slot, err, s.Slot, s.Publication, fmt.Sprintf(create, "'...'"))
	}
	comment := fmt.Sprintf("%s: slot %s, publication %s on %s", commentPrefix, s.Slot, s.Publication, pg.Describe(s.src))
	if s.partial {
		comment += partialMark
	}
	if _, err := conn.Exec(ctx, "COMMENT ON SUBSCRIPTION "+pg.Ident(s.Slot)+" IS "+pg.Literal(comment)); err != nil {
		return fmt.Errorf("comment on subscription %s: %w", s.Slot, err)
	}
	s.waitWorker(ctx, conn)
	return nil
}

// workerStartTimeout bounds how long clone --follow waits for the
// target's launcher to start the new subscription's apply worker.
const workerStartTimeout = 30 * time.Second

// waitWorker waits until the target runs the subscription's apply
// worker, so that "following" is true when clone --follow says it and a
// follow status right after it does not find the worker still to come.
// A worker that does not start is a warning, not a failure: the clone
// is complete, the slot holds every change, and the launcher tries
// again (the warning says where the reason is).
func (s *Started) waitWorker(ctx context.Context, conn *pgx.Conn) {
	deadline := time.Now().Add(workerStartTimeout)
	for {
		sub, err := readSubscription(ctx, conn, s.Slot)
		switch {
		case err != nil:
			s.log.Warn("cannot tell whether the subscription's apply worker started", "subscription", s.Slot, "err", err)
			return
		case sub != nil && sub.Running:
			return
		case time.Now().After(deadline):
			s.log.Warn("the target has not started the subscription's apply worker yet (no free worker slot, max_logical_replication_workers? see the target's server log): pgsprint follow status tells when it runs", "subscription", s.Slot, "waited", workerStartTimeout)
			return
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

// FinishOptions configure Finish.
type FinishOptions struct {
	Source, Target *pgx.ConnConfig
	Names          Names
	// Timeout bounds the wait for the target to catch up.
	Timeout time.Duration
	// StallTimeout bounds, before and after the fence, a catch-up that
	// makes no progress: before, finish refuses to fence; after, it
	// lifts the fence. Zero: DefaultStallTimeout.
	StallTimeout time.Duration
	// NoFence leaves the source writable: the caller has stopped every
	// write to it, and Finish only reads its WAL position.
	NoFence bool
	// Grace is how long the transactions under way on the source may
	// run after the fence before their sessions are ended.
	Grace time.Duration
	// Verify compares the databases once the target has caught up and
	// its sequences are set, before the replication is removed: an
	// error keeps the follow (and lifts the fence).
	Verify func(ctx context.Context, v Verification) error
	// Out receives what the fence does (sessions ended, how to lift
	// it); nil discards it.
	Out    io.Writer
	Logger *slog.Logger
}

// Verification is what Verify is given.
type Verification struct {
	// Tables are the followed tables (quoted schema.name, partitions
	// included) when the follow covers a selection (-t, -n, --filter):
	// only they are compared; nil for a whole database.
	Tables []string
	// SourceMajor and TargetMajor are the servers' major versions: a
	// schema comparison across versions must allow for what each prints
	// differently (compare.NormalizeAcrossVersions).
	SourceMajor, TargetMajor int
	// Writes counts the transaction ids the source assigned since the
	// target caught up: a difference in rows with writes is writes that
	// went on (autovacuum's ANALYZE takes some too).
	Writes func(ctx context.Context) (int64, error)
}

// FinishResult says what Finish did.
type FinishResult struct {
	// Followed is false when no subscription was found: an earlier
	// finish dropped it, and this one only completed the rest.
	Followed bool
	// Verified is false when Verify was not called: the subscription
	// was gone, and the source fenced, so an earlier finish verified.
	Verified bool
	// CaughtUp is the source's WAL position the target applied.
	CaughtUp  string
	Sequences int
	// LargeObjects is what the target's large objects needed to be the
	// source's; none for a follow of a selection (-t, -n, --filter), whose
	// clone copies none unless -b, and whose comparison leaves them out.
	LargeObjects LargeObjectSync
	// Fence is the source's fence after the handover: read-only when
	// Finish fenced it (LiftSQL lifts it).
	Fence Fence
	// Ended are the source sessions the fence ended.
	Ended []EndedSession
	// WriteDowntime is from the fence (or the start, without one) until
	// the target was ready (the grace given to the sessions under way
	// included): caught up, sequences and large objects set. Verification is
	// the time Verify took, Handover the removal of the replication.
	WriteDowntime, Verification, Handover time.Duration
	SourceMajor, TargetMajor              int
}

// Finish hands a follow over: it fences the source (new sessions are
// read-only; the sessions already there get o.Grace, then are ended),
// waits until the target has applied every change up to the fence,
// copies every sequence's value and the large objects that differ, has o.Verify compare both sides, and
// only then drops the subscription, the slot and the publication; the
// source stays read-only. On any error before the handover the fence is
// lifted and the follow goes on. Every step is idempotent and the fence
// is marked in the source's catalog, so a Finish or Abort run after a
// kill finds it.
func Finish(ctx context.Context, o FinishOptions) (res *FinishResult, err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = DefaultStallTimeout
	}
	start := time.Now()
	// One cutover at a time, before anything is read: a second run
	// would fence, end this run's sessions and lift its fence.
	lock, err := lockCutover(ctx, o.Source, o.Names.Slot)
	if err != nil {
		return nil, err
	}
	defer lock.release(ctx)
	dconn, err := pg.Connect(ctx, o.Target)
	if err != nil {
		return nil, err
	}
	defer dconn.Close(context.WithoutCancel(ctx))
	if err := distinct(ctx, o.Source, dconn); err != nil {
		return nil, err
	}
	sconn, err := pg.Connect(ctx, writable(o.Source))
	if err != nil {
		return nil, err
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	sub, err := readSubscription(ctx, dconn, o.Names.Slot)
	if err != nil {
		return nil, err
	}
	res = &FinishResult{Followed: sub != nil}
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
	if res.Fence, err = readFence(ctx, sconn); err != nil {
		return nil, err
	}
	if sub == nil {
		// An earlier finish handed over (or was killed handing over):
		// its fence, or without one its mark on the publication, says
		// it verified first. Else the follow never began (a clone
		// --follow that stopped before it subscribed) or is gone:
		// nothing was verified, nothing is dropped.
		if !res.Fence.Ours(o.Names.Slot) {
			if err := handedOver(ctx, sconn, o.Names); err != nil {
				return nil, err
			}
		}
		if err := dropAll(ctx, sconn, dconn, o.Names, false); err != nil {
			return nil, err
		}
		return res, o.reread(ctx, res)
	}
	// Before the handover, any failure lifts the fence this follow put
	// on the source: it is writable again and the follow goes on.
	// Once the handover began the subscription may be gone: a writable
	// source would then take writes the target never gets, so the fence
	// stays and a rerun completes the handover.
	r, handingOver := res, false
	// A fence found from a killed run is this run's to lift too: the
	// lock says no other run is alive. What the error says of the
	// fence is read again by a new session.
	defer func() {
		if err == nil || !r.Fence.Ours(o.Names.Slot) {
			return
		}
		bg := context.WithoutCancel(ctx)
		if handingOver {
			err = fmt.Errorf("%w; the handover did not complete: the source stays fenced; run pgsprint follow finish again", err)
			return
		}
		if uerr := o.unfence(bg, sconn, r.Fence.Database); uerr != nil {
			err = fmt.Errorf("%w; and lifting the source's fence failed: %v: the source is still read-only: run pgsprint follow abort, or on the source: %s", err, uerr, r.Fence.LiftSQL())
			return
		}
		if rerr := o.reread(bg, r); rerr != nil || r.Fence.ReadOnly {
			err = fmt.Errorf("%w; the fence was lifted, but a new session of the source reads it as %s: run pgsprint follow status", err, describeFence(r.Fence, rerr))
			return
		}
		err = fmt.Errorf("%w; the source is writable again and the target still follows it (pgsprint follow status; finish again, or abort)", err)
	}()
	// DDL the target cannot follow stops finish before the fence (and
	// before it enables a subscription such a stop disabled); the tables
	// created since the clone are copied while writes go on.
	if err := beforeFence(ctx, sconn, dconn, o.Names, sub.Partial, o.Timeout, log); err != nil {
		return res, err
	}
	if !sub.Enabled {
		log.Warn("subscription was disabled: enabling it to catch up", "subscription", o.Names.Slot)
		if _, err := dconn.Exec(ctx, "ALTER SUBSCRIPTION "+pg.Ident(o.Names.Slot)+" ENABLE"); err != nil {
			return res, fmt.Errorf("enable subscription %s on the target: %w", o.Names.Slot, err)
		}
	}
	// Health before the fence: a fence that waits on a worker that
	// cannot apply keeps the source read-only for nothing.
	if err := checkHealth(ctx, sconn, dconn, o.Names, sub.ApplyErrors, o.StallTimeout, o.Timeout); err != nil {
		return res, err
	}
	if err := lock.check(ctx); err != nil {
		return res, err
	}
	if !o.NoFence {
		fmt.Fprintf(out, "fence: writes to the source stop from now until the target is ready: the grace (%s), then the catch-up (given up, and the fence lifted, after %s without progress or %s in all), then the sequences; the verification runs under the fence too, and a failure lifts it\n",
			o.Grace, o.StallTimeout, o.Timeout)
		// The clock starts at the fence, not after the grace: new
		// sessions can no longer write from here on.
		start = time.Now()
		if err := o.fence(ctx, sconn, res, lock.PID, out); err != nil {
			return res, err
		}
	}
	// A transaction prepared between the check and the fence outlives
	// the sessions the fence ended.
	if err := noPrepared(ctx, sconn); err != nil {
		return res, err
	}
	if res.CaughtUp, err = waitCaughtUp(ctx, sconn, dconn, o.Names.Slot, sub.ApplyErrors, o.Timeout, o.StallTimeout, log); err != nil {
		return res, err
	}
	if res.CaughtUp, err = followDDLAfterCatchUp(ctx, sconn, dconn, o.Names, sub.Partial, res.CaughtUp, o.Timeout, o.StallTimeout, log); err != nil {
		return res, err
	}
	if res.Sequences, err = copySequences(ctx, sconn, dconn); err != nil {
		return res, err
	}
	if !sub.Partial {
		if res.LargeObjects, err = syncLargeObjects(ctx, sconn, dconn); err != nil {
			return res, fmt.Errorf("large objects: %w", err)
		}
		if res.LargeObjects != (LargeObjectSync{}) {
			fmt.Fprintln(out, res.LargeObjects)
		}
	}
	res.WriteDowntime = time.Since(start)
	v := Verification{SourceMajor: res.SourceMajor, TargetMajor: res.TargetMajor}
	if sub.Partial {
		if v.Tables, err = publishedTables(ctx, sconn, o.Names.Publication); err != nil {
			return res, err
		}
	}
	verified := time.Now()
	if err := o.verify(ctx, sconn, v, res); err != nil {
		return res, err
	}
	res.Verification = time.Since(verified)
	if err := lock.check(ctx); err != nil {
		return res, err
	}
	handover, handingOver := time.Now(), true
	if err := markHandover(ctx, sconn, o.Names); err != nil {
		return res, err
	}
	if err := dropAll(ctx, sconn, dconn, o.Names, true); err != nil {
		return res, err
	}
	res.Handover = time.Since(handover)
	return res, o.reread(ctx, res)
}

// reread sets res.Fence to what a new session of the source reads in the
// catalog: what finish says of the source is what its users get.
func (o FinishOptions) reread(ctx context.Context, res *FinishResult) error {
	conn, err := pg.Connect(ctx, o.Source)
	if err != nil {
		return fmt.Errorf("read the source's fence again: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	f, err := readFence(ctx, conn)
	if err != nil {
		return err
	}
	res.Fence = f
	return nil
}

// describeFence says what a fence read again holds, for an error.
func describeFence(f Fence, err error) string {
	switch {
	case err != nil:
		return fmt.Sprintf("unknown (%v)", err)
	case f.Slot != "":
		return fmt.Sprintf("read-only, marked by follow %s", f.Slot)
	case f.ReadOnly:
		return "read-only by a setting that is not pgsprint's"
	}
	return "writable"
}

// unfence lifts the fence on sconn, or on a new connection when a query
// cut short by ctx closed sconn.
func (o FinishOptions) unfence(ctx context.Context, sconn *pgx.Conn, db string) error {
	if sconn.IsClosed() {
		conn, err := pg.Connect(ctx, writable(o.Source))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		sconn = conn
	}
	return unfence(ctx, sconn, db)
}

// fence makes the source read-only for new sessions and ends the
// sessions that began before, unless the database is read-only already
// by a setting of the DBA's, which is left as it is.
func (o FinishOptions) fence(ctx context.Context, sconn *pgx.Conn, res *FinishResult, keep int32, out io.Writer) error {
	f := res.Fence
	switch {
	case f.Ours(o.Names.Slot):
		fmt.Fprintf(out, "fence: the source database %s is still fenced by an earlier finish\n", f.Database)
	case f.ReadOnly:
		fmt.Fprintf(out, "fence: the source database %s is read-only by a setting that is not pgsprint's: left as it is\n", f.Database)
	default:
		if err := setFence(ctx, sconn, f.Database, o.Names.Slot); err != nil {
			return err
		}
		res.Fence.ReadOnly, res.Fence.Slot = true, o.Names.Slot
		fmt.Fprintf(out, "fence: the source database %s is read-only for new sessions (if this run dies, lift it with: %s)\n", f.Database, res.Fence.LiftSQL())
	}
	var at time.Time
	if err := sconn.QueryRow(ctx, "SELECT pg_catalog.statement_timestamp()").Scan(&at); err != nil {
		return fmt.Errorf("read the source's clock: %w", err)
	}
	var err error
	res.Ended, err = endSessions(ctx, sconn, at, o.Grace, keep, out)
	return err
}

// verify runs o.Verify, with v.Writes counting from now.
func (o FinishOptions) verify(ctx context.Context, sconn *pgx.Conn, v Verification, res *FinishResult) error {
	if o.Verify == nil {
		return nil
	}
	const next = "SELECT pg_catalog.txid_snapshot_xmax(pg_catalog.txid_current_snapshot())"
	var from int64
	if err := sconn.QueryRow(ctx, next).Scan(&from); err != nil {
		return fmt.Errorf("read the source's next transaction id: %w", err)
	}
	v.Writes = func(ctx context.Context) (int64, error) {
		var to int64
		err := sconn.QueryRow(ctx, next).Scan(&to)
		return to - from, err
	}
	res.Verified = true
	return o.Verify(ctx, v)
}

// publishedTables lists the tables the publication covers, partitioned
// tables and their partitions both: what a partial follow compares.
func publishedTables(ctx context.Context, conn *pgx.Conn, pub string) ([]string, error) {
	return publicationTables(ctx, conn, `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_catalog.pg_publication_rel pr JOIN pg_catalog.pg_publication p ON p.oid = pr.prpubid
		JOIN pg_catalog.pg_class c ON c.oid = pr.prrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE p.pubname = $1
		UNION
		SELECT format('%I.%I', schemaname, tablename) FROM pg_catalog.pg_publication_tables WHERE pubname = $1
		ORDER BY 1`, pub)
}

// waitCaughtUp reads the source's current WAL position and waits until
// the slot's confirmed position, which the target's apply worker
// advances as it applies, reaches it. It stops as soon as the target
// counts an apply error beyond errors (PostgreSQL 15 and later), quoting
// it from the target's log when it can.
func waitCaughtUp(ctx context.Context, sconn, dconn *pgx.Conn, slot string, baseline int64, timeout, stall time.Duration, log *slog.Logger) (string, error) {
	// The target is the end of the last record inserted: every commit
	// is before it. pg_current_wal_lsn() will not do: it is where WAL
	// was written up to, which may be inside a record the walsender
	// cannot decode, and so never confirm, until the rest is flushed.
	// Then a commit of our own with synchronous_commit on flushes
	// everything up to the target, which asynchronous commits (and
	// the records after them) may otherwise leave in memory for long.
	target, err := flushedPosition(ctx, sconn)
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(timeout)
	lastLog, lastCheck, clock := time.Now(), time.Now(), newStallClock()
	for {
		var done bool
		var behind int64
		err := sconn.QueryRow(ctx, `SELECT coalesce(confirmed_flush_lsn >= $2::pg_lsn, false),
			coalesce(greatest(pg_catalog.pg_wal_lsn_diff($2::pg_lsn, confirmed_flush_lsn), 0), -1)::int8
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
		stalled, err := clock.stalled(ctx, dconn, slot, fmt.Sprint(behind), stall)
		if err != nil {
			return "", err
		}
		if stalled {
			return "", fmt.Errorf("the target made no progress catching up for %s (%d bytes behind): %s", stall, behind, stallCause(ctx, sconn, dconn, slot))
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the target has not caught up with the source's WAL position %s within %s (%d bytes behind): see pgsprint follow status for apply errors, and make sure nothing writes to the source", target, timeout, behind)
		}
		if baseline >= 0 && time.Since(lastCheck) > 250*time.Millisecond {
			lastCheck = time.Now()
			sub, err := readSubscription(ctx, dconn, slot)
			if err != nil {
				return "", err
			}
			if sub != nil && sub.ApplyErrors > baseline {
				return "", fmt.Errorf("the target's apply worker fails (%d bytes behind): %s; next: %s", behind, ApplyErrorText(sub), ApplyErrorAdvice(sub.LastError))
			}
		}
		if time.Since(lastLog) > 2*time.Second {
			log.Info("follow: waiting for the target to catch up", "bytes behind", behind, "source position", target)
			lastLog = time.Now()
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// ApplyErrorText says what the target's apply worker failed on: its
// error quoted from the target's log, or where to find it.
func ApplyErrorText(s *Subscription) string {
	if s.LastError != "" {
		return fmt.Sprintf("%q (from the target's server log; %d apply errors counted)", s.LastError, s.ApplyErrors)
	}
	return fmt.Sprintf("%d apply errors counted; the error is in the target's server log (pgsprint quotes it when the target runs the logging collector and the role may read it)", s.ApplyErrors)
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

// Dropped says what Abort removed.
type Dropped struct {
	Subscription, Slot, Publication bool
	// Unfenced: the source was fenced by this follow's finish and is
	// writable again.
	Unfenced bool
	// Fence is the source's fence as Abort leaves it: read-only by a
	// setting that is not pgsprint's, Abort leaves it.
	Fence Fence
}

// Abort drops the subscription on the target and the slot and the
// publication on the source, whichever exist, and lifts the fence a
// finish of this follow left on the source (killed, or after its
// handover).
func Abort(ctx context.Context, src, dst *pgx.ConnConfig, n Names) (*Dropped, error) {
	lock, err := lockCutover(ctx, src, n.Slot)
	if err != nil {
		return nil, err
	}
	defer lock.release(ctx)
	dconn, err := pg.Connect(ctx, dst)
	if err != nil {
		return nil, err
	}
	defer dconn.Close(context.WithoutCancel(ctx))
	if err := distinct(ctx, src, dconn); err != nil {
		return nil, err
	}
	sconn, err := pg.Connect(ctx, writable(src))
	if err != nil {
		return nil, err
	}
	defer sconn.Close(context.WithoutCancel(ctx))
	sub, err := readSubscription(ctx, dconn, n.Slot)
	if err != nil {
		return nil, err
	}
	before, err := readSource(ctx, sconn, n)
	if err != nil {
		return nil, err
	}
	d := &Dropped{Subscription: sub != nil, Slot: before.Slot, Publication: before.Publication, Fence: before.Fence}
	// The fence is lifted even when a drop fails: abort is what a DBA
	// runs to have the source back, and a rerun drops the rest.
	dropErr := dropAll(ctx, sconn, dconn, n, sub != nil)
	switch {
	case d.Fence.Ours(n.Slot):
		if err := unfence(ctx, sconn, d.Fence.Database); err != nil {
			return nil, err
		}
		d.Unfenced = true
	case d.Fence.Slot == n.Slot:
		// The marker without the fence (lifted by hand with an older
		// LiftSQL): left, it would make a later read-only setting of
		// the DBA's look like this follow's.
		if _, err := sconn.Exec(ctx, "ALTER DATABASE "+pg.Ident(d.Fence.Database)+" RESET "+fenceSetting); err != nil {
			return nil, fmt.Errorf("remove the fence's marker %s from the source: %w", fenceSetting, err)
		}
	}
	if d.Fence, err = readFence(ctx, sconn); err != nil {
		return nil, err
	}
	if dropErr != nil {
		if d.Unfenced {
			return nil, fmt.Errorf("%w (the fence was lifted: the source database %s is writable)", dropErr, d.Fence.Database)
		}
		return nil, dropErr
	}
	return d, nil
}

// dropAll drops the subscription (if sub), the slot and the publication.
// DROP SUBSCRIPTION drops the slot through the target's connection to the
// source; when the target cannot reach the source, the subscription is
// detached from the slot first and the slot dropped from here.
func dropAll(ctx context.Context, sconn, dconn *pgx.Conn, n Names, sub bool) error {
	if sub {
		name := pg.Ident(n.Slot)
		if err := dropSubscription(ctx, sconn, dconn, n.Slot); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) {
				return err // not the target's answer: a timeout, which the fallback would meet too
			}
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
	for _, conn := range []*pgx.Conn{sconn, dconn} {
		if err := dropCapture(ctx, conn, n.Slot); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
