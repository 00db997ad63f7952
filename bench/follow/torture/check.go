package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// fenceWatch samples the source database's fence (its catalog setting)
// every 30 ms while finish runs.
type fenceWatch struct {
	stopCh chan struct{}
	done   chan struct{}
	// atStart: fenced when the watch began (a killed finish's fence);
	// set: a fence appeared while watched.
	atStart, set bool
}

func (r *round) watchFence(ctx context.Context) *fenceWatch {
	w := &fenceWatch{stopCh: make(chan struct{}), done: make(chan struct{})}
	conn, err := connect(ctx, r.t.src.ConnString("postgres"))
	if err != nil {
		r.fail("harness: watch the fence: %v", err)
		close(w.done)
		return w
	}
	fenced := func() bool {
		var ro bool
		conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_db_role_setting s, unnest(s.setconfig) c
			WHERE s.setrole = 0 AND s.setdatabase = (SELECT oid FROM pg_database WHERE datname = $1)
			AND c ~* '^default_transaction_read_only=(on|true|1|yes)')`, r.srcDB).Scan(&ro)
		return ro
	}
	w.atStart = fenced()
	go func() {
		defer close(w.done)
		defer conn.Close(context.Background())
		was := w.atStart
		for {
			select {
			case <-w.stopCh:
				return
			case <-time.After(30 * time.Millisecond):
			}
			now := fenced()
			if now && !was {
				w.set = true
			}
			was = now
		}
	}()
	return w
}

func (w *fenceWatch) stop() *fenceWatch {
	select {
	case <-w.done:
	default:
		close(w.stopCh)
		<-w.done
	}
	return w
}

// checkFenceWatch: no finish fences the source while the follow cannot
// finish (health before the fence; DDL, prepared transactions refused
// before it).
func (r *round) checkFenceWatch(w *fenceWatch, who string) {
	if !w.set {
		return
	}
	switch {
	case r.hbaFile != "":
		r.fail("%s fenced the source while the apply worker could not connect (pg_hba rejects it)", who)
	case r.hasClass(stopped):
		r.fail("%s fenced the source although DDL that must stop the follow ran: %s", who, r.firstOf(stopped))
	case r.openPrepared():
		r.fail("%s fenced the source while a prepared transaction was open", who)
	}
}

// catalogs is what both sides' catalogs hold of the round's follow.
type catalogs struct {
	sub, subEnabled          bool
	applyErrors, syncErrors  int64
	slot, pub                bool
	readOnly                 bool   // default_transaction_read_only on the source database
	fenceSetting             string // pgsprint.fence on the source database
	settings                 int    // any database setting, on either side
	stops                    int    // DDL stops the source's capture recorded
	srcCapture, dstCapture   int    // event triggers and schema pgsprint
	slots, subs, origins     int    // anywhere on each server
	advisory                 int    // advisory locks held in the source database
	newSessionRO, newSession bool   // a new source session is read-only (newSession: it connected)
}

func (r *round) readCatalogs(ctx context.Context) (c catalogs, err error) {
	sc, err := connect(ctx, r.t.src.ConnString("postgres"))
	if err != nil {
		return c, err
	}
	defer sc.Close(context.Background())
	dc, err := connect(ctx, r.t.dst.ConnString(r.dstDB))
	if err != nil {
		return c, err
	}
	defer dc.Close(context.Background())
	var config []string
	err = sc.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $2),
		(SELECT count(*) FROM pg_replication_slots),
		coalesce((SELECT setconfig FROM pg_db_role_setting WHERE setrole = 0 AND setdatabase = (SELECT oid FROM pg_database WHERE datname = $1)), '{}'),
		(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = $1))`,
		r.srcDB, r.slot).Scan(&c.slot, &c.slots, &config, &c.advisory)
	if err != nil {
		return c, fmt.Errorf("read the source cluster: %w", err)
	}
	c.settings = len(config)
	for _, s := range config {
		k, v, _ := strings.Cut(s, "=")
		switch strings.ToLower(k) {
		case "default_transaction_read_only":
			c.readOnly = slices.Contains([]string{"on", "true", "1", "yes"}, strings.ToLower(v))
		case "pgsprint.fence":
			c.fenceSetting = v
		}
	}
	src, err := connect(ctx, r.src)
	if err != nil {
		return c, err
	}
	defer src.Close(context.Background())
	c.newSession = true
	var ro string
	err = src.QueryRow(ctx, `SELECT current_setting('default_transaction_read_only'),
		EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1),
		(SELECT count(*) FROM pg_event_trigger) + (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgsprint'),
		CASE WHEN to_regclass(format('pgsprint.%I', $1::text)) IS NULL THEN 0
		ELSE (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM pgsprint.%I WHERE action = ''stop''', $1::text), false, true, '')))[1]::text::int END`,
		r.slot).Scan(&ro, &c.pub, &c.srcCapture, &c.stops)
	if err != nil {
		return c, fmt.Errorf("read the source database: %w", err)
	}
	c.newSessionRO = ro == "on"
	var dstSettings int
	err = dc.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_subscription WHERE subname = $1),
		coalesce((SELECT subenabled FROM pg_subscription WHERE subname = $1), false),
		coalesce((SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = $1), 0),
		coalesce((SELECT sync_error_count FROM pg_stat_subscription_stats WHERE subname = $1), 0),
		(SELECT count(*) FROM pg_subscription), (SELECT count(*) FROM pg_replication_origin),
		(SELECT count(*) FROM pg_event_trigger) + (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgsprint'),
		(SELECT count(*) FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database()))`,
		r.slot).Scan(&c.sub, &c.subEnabled, &c.applyErrors, &c.syncErrors, &c.subs, &c.origins, &c.dstCapture, &dstSettings)
	if err != nil {
		return c, fmt.Errorf("read the target database: %w", err)
	}
	c.settings += dstSettings
	return c, nil
}

// afterChaos checks, once every finish of the chaos has ended: every
// acknowledged write is on the target, or the source is writable and
// still followed; and status's account matches the catalogs.
func (r *round) afterChaos(ctx context.Context) {
	acked := r.load.snapshot()
	c, err := r.readCatalogs(ctx)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	switch {
	case c.sub && !c.newSessionRO:
		// Writable and followed: the writes go on reaching the target.
	case !c.sub:
		if !c.newSessionRO {
			r.fail("after the finishes the source is writable but no longer followed (subscription gone): writes go nowhere")
		}
		r.checkAcked(ctx, acked, "after the finishes (not followed)")
	}
	if r.finished && c.sub {
		r.fail("a finish exited 0, but the subscription is still there")
	}
	r.checkStatus(ctx, "after the finishes")
}

// checkAcked: every acknowledged id is on the target.
func (r *round) checkAcked(ctx context.Context, acked []int64, where string) {
	dc, err := connect(ctx, r.dst)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	defer dc.Close(context.Background())
	rows, err := dc.Query(ctx, "SELECT id FROM acked")
	if err != nil {
		r.fail("harness: read the target's acked ids: %v", err)
		return
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		r.fail("harness: read the target's acked ids: %v", err)
		return
	}
	have := make(map[int64]bool, len(ids))
	for _, id := range ids {
		have[id] = true
	}
	var missing []int64
	for _, id := range acked {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		r.fail("%s: %d of %d acknowledged writes are not on the target (ids %v)", where, len(missing), len(acked), missing[:min(5, len(missing))])
	}
}

// afterFinish checks a finish that exited 0 at once: what it says of the
// source is what a new session sees.
func (r *round) afterFinish(ctx context.Context, res result) {
	c, err := r.readCatalogs(ctx)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	if strings.Contains(res.stdout, "stays read-only") && !c.newSessionRO {
		r.fail("finish said the source stays read-only, but a new session may write")
	}
	if c.sub || c.slot || c.pub {
		r.fail("finish exited 0 but left subscription %v, slot %v, publication %v", c.sub, c.slot, c.pub)
	}
}

// final ends the round as the DBA would and checks that nothing of
// pgsprint is left: after a finish, every write on the source (every
// acknowledged one, and any other) is on the target, then the printed
// statements lift the fence; after an abort, the source is writable.
func (r *round) final(ctx context.Context) {
	if !r.finished && !r.aborted {
		return
	}
	pause(ctx, 300*time.Millisecond)
	for _, p := range r.prepared {
		r.resolvePrepared(ctx, p)
	}
	r.load.stop()
	if r.finished {
		r.checkAcked(ctx, r.load.snapshot(), "after finish")
		r.checkSameIDs(ctx)
		r.liftFence(ctx)
	}
	// A killed run's sessions may take a moment to end.
	var c catalogs
	var err error
	for i := 0; i < 30; i++ {
		if c, err = r.readCatalogs(ctx); err != nil || c.advisory == 0 {
			break
		}
		pause(ctx, 100*time.Millisecond)
	}
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	var left []string
	add := func(cond bool, what string) {
		if cond {
			left = append(left, what)
		}
	}
	add(c.slots > 0, fmt.Sprintf("%d replication slots on the source", c.slots))
	add(c.pub, "the publication")
	add(c.subs > 0, fmt.Sprintf("%d subscriptions on the target", c.subs))
	add(c.origins > 0, fmt.Sprintf("%d replication origins on the target", c.origins))
	add(c.srcCapture > 0, "the DDL capture (event triggers, schema pgsprint) on the source")
	add(c.dstCapture > 0, "the DDL capture (event triggers, schema pgsprint) on the target")
	add(c.fenceSetting != "", "the pgsprint.fence setting")
	add(c.readOnly || c.newSessionRO, "the source read-only")
	add(c.settings > 0, fmt.Sprintf("%d database settings", c.settings))
	add(c.advisory > 0, fmt.Sprintf("%d advisory locks on the source", c.advisory))
	if len(left) > 0 {
		how := "abort"
		if r.finished {
			how = "finish and the printed fence lift"
		}
		r.fail("after %s: left %s", how, strings.Join(left, ", "))
	}
	st := r.pgsprint(ctx, time.Minute, "follow", "status", "--source", r.src, "--target", r.dst)
	if st.code == 0 || strings.Contains(st.stdout, "READ-ONLY") {
		r.fail("status after the end: exit %d: %s", st.code, oneLine(st.stdout))
	}
}

// checkSameIDs: after a finish, the source's acked rows (acknowledged or
// not) are the target's, and so is pgbench_history's count.
func (r *round) checkSameIDs(ctx context.Context) {
	q := "SELECT count(*)::text || ' ' || coalesce(sum(id), 0)::text || ' ' || (SELECT count(*) FROM pgbench_history)::text FROM acked"
	var a, b string
	for side, p := range map[string]*string{r.src: &a, r.dst: &b} {
		conn, err := connect(ctx, side)
		if err != nil {
			r.fail("harness: %v", err)
			return
		}
		err = conn.QueryRow(ctx, q).Scan(p)
		conn.Close(context.Background())
		if err != nil {
			r.fail("harness: %v", err)
			return
		}
	}
	if a != b {
		r.fail("after finish the source's writes (acked count, id sum, history count) are %s, the target's %s", a, b)
	}
}

// liftFence runs the statements finish printed to lift the fence, one
// after the other as psql would.
func (r *round) liftFence(ctx context.Context) {
	c, err := r.readCatalogs(ctx)
	if err != nil || !c.readOnly {
		return
	}
	res := r.pgsprint(ctx, time.Minute, "follow", "status", "--source", r.src, "--target", r.dst)
	_, lift, ok := strings.Cut(res.stdout, "lift it with: ")
	lift, _, _ = strings.Cut(lift, "\n")
	if !ok {
		r.fail("the source is fenced after finish but status prints no lift statement: %s", oneLine(res.stdout))
		return
	}
	conn, err := connect(ctx, r.src)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	defer conn.Close(context.Background())
	for _, q := range strings.Split(lift, "; ") {
		if _, err := conn.Exec(ctx, q); err != nil {
			r.fail("the printed fence lift fails at %q: %v", q, err)
			return
		}
	}
}

// account is what follow status says of the follow.
type account struct {
	code                  int
	sub, slotLine, noSlot bool
	fence                 string // ours, other, none
	ddlStop               bool
	out                   string
}

func (r *round) status(ctx context.Context) account {
	res := r.pgsprint(ctx, time.Minute, "follow", "status", "--source", r.src, "--target", r.dst)
	a := account{code: res.code, out: res.stdout + res.stderr, fence: "none"}
	for _, l := range strings.Split(res.stdout, "\n") {
		switch {
		case strings.HasPrefix(l, "subscription "+r.slot+": none"):
		case strings.HasPrefix(l, "subscription "+r.slot+":"):
			a.sub = true
		case strings.HasPrefix(l, "lag: "):
			a.slotLine = true
		case strings.HasPrefix(l, "slot "+r.slot+": none"):
			a.noSlot = true
		case strings.HasPrefix(l, "fence: ") && strings.Contains(l, "(set by follow finish)"):
			a.fence = "ours"
		case strings.HasPrefix(l, "fence: "):
			a.fence = "other"
		case strings.HasPrefix(l, "DDL NOT FOLLOWED"):
			a.ddlStop = true
		}
	}
	return a
}

// checkStatus: follow status's account matches the catalogs read before
// and after it (nothing of the follow changes meanwhile: no pgsprint
// runs).
func (r *round) checkStatus(ctx context.Context, where string) {
	before, err := r.readCatalogs(ctx)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	a := r.status(ctx)
	after, err := r.readCatalogs(ctx)
	if err != nil {
		r.fail("harness: %v", err)
		return
	}
	if before.sub != after.sub || before.slot != after.slot || before.readOnly != after.readOnly || before.fenceSetting != after.fenceSetting {
		return // changed under status: nothing to compare
	}
	c := before
	bad := func(format string, args ...any) {
		r.fail("%s: status does not match the catalogs: %s (status: %s)", where, fmt.Sprintf(format, args...), oneLine(a.out))
	}
	if a.sub != c.sub {
		bad("subscription %v, catalog %v", a.sub, c.sub)
	}
	if (a.slotLine && !c.slot) || (a.noSlot && c.slot) || (!a.slotLine && !a.noSlot) {
		bad("slot shown %v / none %v, catalog %v", a.slotLine, a.noSlot, c.slot)
	}
	want := "none"
	switch {
	case c.readOnly && c.fenceSetting == r.slot:
		want = "ours"
	case c.readOnly:
		want = "other"
	}
	if a.fence != want {
		bad("fence %s, catalog %s (read-only %v, pgsprint.fence %q)", a.fence, want, c.readOnly, c.fenceSetting)
	}
	if c.readOnly != c.newSessionRO {
		bad("the catalog's read-only %v, a new session's %v", c.readOnly, c.newSessionRO)
	}
	if !c.sub && (c.slot || c.pub) && !strings.Contains(a.out, "publication "+r.slot) {
		bad("slot %v or publication %v without subscription, not named", c.slot, c.pub)
	}
	if a.code == 0 {
		switch {
		case !c.sub:
			bad("exit 0 without a subscription")
		case !c.subEnabled:
			bad("exit 0 with the subscription disabled")
		case c.stops > 0:
			bad("exit 0 with %d DDL stops recorded", c.stops)
		case c.applyErrors > 0 || c.syncErrors > 0:
			bad("exit 0 with %d apply and %d sync errors", c.applyErrors, c.syncErrors)
		}
	}
	if c.sub && c.stops > 0 && !a.ddlStop {
		bad("%d DDL stops recorded, none named", c.stops)
	}
	// After a named stop the follow is over (abort, clone again): an
	// apply error then is not what a DBA acts on.
	if c.sub && c.applyErrors > 0 && r.conflict == 0 && r.hbaFile == "" && !a.ddlStop {
		r.fail("%s: the apply worker fails without an injected fault, not a named stop (DDL: %s): %s", where, r.firstOf(either)+r.firstOf(stopped), applyError(a.out))
	}
	if c.sub && r.hasClass(stopped) && !a.ddlStop {
		r.fail("%s: DDL that must stop the follow is not named by status: %s (status exit %d: %s)", where, r.firstOf(stopped), a.code, oneLine(a.out))
	}
}

// applyError is the apply error status quotes, or its whole output.
func applyError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "last apply error") {
			return l
		}
	}
	return oneLine(out)
}
