package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// cutoverSQL is the source of the cutover tests: one keyed table the
// acknowledged-write logger writes to, and a sequence.
const cutoverSQL = `CREATE TABLE keyed (id int PRIMARY KEY, v text);
	CREATE SEQUENCE ticket;
	INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 500) i;
	SELECT nextval('ticket') FROM generate_series(1, 3)`

// signal is an io.Writer that closes fenced at the first fence line: a
// second finish starts once the first has fenced.
type signal struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	fenced chan struct{}
	once   sync.Once
}

func (s *signal) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Contains(p, []byte("is read-only for new sessions")) {
		s.once.Do(func() { close(s.fenced) })
	}
	return s.buf.Write(p)
}

func (s *signal) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestCutoverRace: two finishes of one follow race, the second started
// 0.3s after the first's fence line or at the same moment, while a
// writer logs every acknowledged insert. Exactly one proceeds; the other
// is refused at once (ErrBusy), naming the session that holds the lock;
// every acknowledged write is on the target, and the source stays
// fenced as the winner says.
func TestCutoverRace(t *testing.T) {
	t.Parallel()
	c := sharedLogical(t)
	for _, tc := range []struct {
		name  string
		after time.Duration // after the first's fence line; <0: at once
	}{{"0.3s after the fence", 300 * time.Millisecond}, {"same moment", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			o := newCase(t, c, cutoverSQL)
			following(t, o)
			w := startWriter(o.Source, 100000)
			time.Sleep(200 * time.Millisecond)
			run := func(out *signal) (*FinishResult, error, time.Duration) {
				began := time.Now()
				res, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute,
					Grace: time.Second, Out: out, Verify: func(ctx context.Context, v Verification) error {
						time.Sleep(time.Second) // the other run meets this one in every step
						return sameData(o.Source, o.Target)(ctx, v)
					}})
				return res, err, time.Since(began)
			}
			outs := [2]*signal{{fenced: make(chan struct{})}, {fenced: make(chan struct{})}}
			var errs [2]error
			var took [2]time.Duration
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if i == 1 && tc.after >= 0 {
						select {
						case <-outs[0].fenced:
						case <-time.After(30 * time.Second):
						}
						time.Sleep(tc.after)
					}
					_, errs[i], took[i] = run(outs[i])
				}()
			}
			wg.Wait()
			time.Sleep(200 * time.Millisecond) // the writer meets the fence
			acked, refused := w.halt()
			ok, busy := 0, 0
			for i, err := range errs {
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrBusy) && strings.Contains(err.Error(), "pid ") && strings.Contains(err.Error(), "started "):
					busy++
					if took[i] > 5*time.Second {
						t.Errorf("the refused finish took %s", took[i])
					}
				default:
					t.Errorf("finish %d: %v\n%s", i, err, outs[i])
				}
			}
			if ok != 1 || busy != 1 {
				t.Fatalf("%d finishes proceeded and %d were refused as busy, want 1 and 1: %v", ok, busy, errs)
			}
			if len(acked) == 0 || refused == 0 {
				t.Errorf("writer: %d acknowledged, %d refused: it did not write through the fence", len(acked), refused)
			}
			if l := lost(t, o.Target, acked); len(l) > 0 {
				t.Errorf("%d acknowledged writes are not on the target: %s", len(l), strings.Join(l, ", "))
			}
			nothingLeft(t, o.Source, o.Target, o.Names)
			if !fenced(t, o.Source) {
				t.Error("the source is writable after the handover")
			}
		})
	}
}

// TestFinishRefusedBeforeFence: what would make the fence wait for
// nothing, or lose a write, is refused while the source is still
// writable, and the follow goes on: an apply worker that cannot connect
// to the source, a prepared transaction, the source given as the target,
// a new table whose copy fails.
func TestFinishRefusedBeforeFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	for _, tc := range []struct {
		name string
		// setup breaks the follow; it returns what undoes it.
		setup func(t *testing.T, o *FinishOptions) func()
		want  []string
		// dead: the follow no longer replays (the worker cannot
		// connect).
		dead bool
	}{
		{name: "apply worker cannot connect", dead: true, want: []string{"not healthy", "not in use on the source"},
			setup: func(t *testing.T, o *FinishOptions) func() {
				// As a pg_hba reject would: the worker's connection fails.
				exec(t, o.Target, fmt.Sprintf("ALTER SUBSCRIPTION %s CONNECTION 'host=%s port=%d dbname=no_such_database'", o.Names.Slot, c.SocketDir(), c.Port()))
				waitFor(t, o.Source, "false", "SELECT active::text FROM pg_replication_slots WHERE slot_name = $1", o.Names.Slot)
				return func() {}
			}},
		{name: "prepared transaction", want: []string{"prepared transactions", "'pgsprint_test_2pc'"},
			setup: func(t *testing.T, o *FinishOptions) func() {
				exec(t, o.Source, "BEGIN; INSERT INTO keyed VALUES (9001, 'prepared'); PREPARE TRANSACTION 'pgsprint_test_2pc'")
				return func() { exec(t, o.Source, "ROLLBACK PREPARED 'pgsprint_test_2pc'") }
			}},
		{name: "target is the source", want: []string{"same database"},
			setup: func(t *testing.T, o *FinishOptions) func() {
				o.Target = o.Source
				return func() {}
			}},
		{name: "new table copy fails", want: []string{"fails to copy public.fresh", "sync errors"},
			setup: func(t *testing.T, o *FinishOptions) func() {
				if c.Version() < 15 {
					t.Skip("sync errors are counted from PostgreSQL 15")
				}
				exec(t, o.Source, "CREATE TABLE fresh (id int PRIMARY KEY)")
				waitFor(t, o.Target, "true", "SELECT (to_regclass('public.fresh') IS NOT NULL)::text")
				exec(t, o.Target, "INSERT INTO fresh VALUES (1)")
				exec(t, o.Source, "INSERT INTO fresh VALUES (1)")
				return func() {}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := newCase(t, c, cutoverSQL)
			following(t, o)
			var out bytes.Buffer
			fo := FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: 20 * time.Second, StallTimeout: 2 * time.Second,
				Grace: time.Second, Out: &out, Verify: sameData(o.Source, o.Target)}
			undo := tc.setup(t, &fo)
			defer undo()
			for try := range 2 { // a rerun refuses the same way
				began := time.Now()
				_, err := Finish(ctx, fo)
				if err == nil {
					t.Fatalf("Finish: no error\n%s", out.String())
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Finish %d: %v; want it to say %q", try, err, w)
					}
				}
				if d := time.Since(began); d > 15*time.Second {
					t.Errorf("Finish %d took %s to refuse", try, d)
				}
			}
			if strings.Contains(out.String(), "fence:") {
				t.Errorf("Finish fenced the source:\n%s", out.String())
			}
			if fenced(t, o.Source) {
				t.Error("the source is fenced after a refused finish")
			}
			if v := scalar(t, o.Source, "SELECT count(*)::text FROM pg_publication WHERE pubname = $1", o.Names.Publication); v != "1" {
				t.Error("the refused finish dropped the publication")
			}
			if v := scalar(t, o.Source, "SELECT count(*)::text FROM pg_namespace WHERE nspname = 'pgsprint'"); v != "1" {
				t.Error("the refused finish dropped the DDL capture")
			}
			if v := scalar(t, o.Target, "SELECT count(*)::text FROM pg_subscription WHERE subname = $1", o.Names.Slot); v != "1" {
				t.Error("the follow is gone after a refused finish")
			}
			if !tc.dead {
				exec(t, o.Source, "INSERT INTO keyed VALUES (7001, 'after the refusal')")
				waitFor(t, o.Target, "1", "SELECT count(*)::text FROM keyed WHERE id = 7001")
			}
			if tc.name == "new table copy fails" {
				st, err := ReadState(ctx, o.Source, o.Target, o.Names)
				if err != nil || st.Sub.SyncErrors < 1 || strings.Join(st.Copying, ",") != "public.fresh" {
					t.Errorf("ReadState does not name the failing copy: %+v, copying %v, %v", st.Sub, st.Copying, err)
				}
			}
			if tc.name == "prepared transaction" {
				st, err := ReadState(ctx, o.Source, o.Target, o.Names)
				if err != nil || len(st.Source.Prepared) != 1 || st.Source.Prepared[0].GID != "pgsprint_test_2pc" {
					t.Errorf("ReadState does not list the prepared transaction: %+v, %v", st.Source, err)
				}
			}
		})
	}
}

// TestInterruptedHandover: a finish killed in its handover leaves the
// source fenced, the subscription gone and the DDL capture on both
// sides. The state says so (status then says to run finish again), and
// abort removes everything, capture included, and lifts the fence.
func TestInterruptedHandover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	o := newCase(t, c, cutoverSQL)
	following(t, o)
	withConn(t, o.Source, func(ctx context.Context, conn *pgx.Conn) {
		if err := setFence(ctx, conn, conn.Config().Database, o.Names.Slot); err != nil {
			t.Fatal(err)
		}
	})
	exec(t, o.Target, "DROP SUBSCRIPTION "+o.Names.Slot) // the handover's first step
	st, err := ReadState(ctx, o.Source, o.Target, o.Names)
	if err != nil || st.Sub != nil || !st.Source.Fence.Ours(o.Names.Slot) || !st.Source.Capture || !st.TargetCapture {
		t.Fatalf("ReadState after a killed handover: sub %+v, source %+v, target capture %v, %v", st.Sub, st.Source, st.TargetCapture, err)
	}
	// The cleanup printed for the target removes all of its capture:
	// every function, the schema.
	exec(t, o.Target, CaptureCleanupSQL(o.Names.Slot))
	if v := scalar(t, o.Target, "SELECT count(*)::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'pgsprint'"); v != "0" {
		t.Errorf("CaptureCleanupSQL left %s pgsprint functions", v)
	}
	if _, err := Abort(ctx, o.Source, o.Target, o.Names); err != nil {
		t.Fatal(err)
	}
	nothingLeft(t, o.Source, o.Target, o.Names)
	for _, side := range []*pgx.ConnConfig{o.Source, o.Target} {
		if v := scalar(t, side, "SELECT count(*)::text FROM pg_event_trigger WHERE evtname LIKE $1", o.Names.Slot+"%"); v != "0" {
			t.Errorf("%s event triggers left", v)
		}
		if v := scalar(t, side, "SELECT count(*)::text FROM pg_namespace WHERE nspname = 'pgsprint'"); v != "0" {
			t.Error("the capture schema is left")
		}
		if v := scalar(t, side, "SELECT count(*)::text FROM pg_proc WHERE proname LIKE $1", o.Names.Slot+"%"); v != "0" {
			t.Errorf("%s capture functions left", v)
		}
	}
	if fenced(t, o.Source) || scalar(t, o.Source, "SELECT count(*)::text FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())") != "0" {
		t.Error("abort left the fence or its marker")
	}
}

// TestStaleErrors: apply errors counted before the running worker
// started, which has run a while connected to the source, are history;
// any other count is current.
func TestStaleErrors(t *testing.T) {
	t.Parallel()
	long, just := time.Now().Add(-20*time.Second), time.Now().Add(-time.Second)
	for _, tc := range []struct {
		name  string
		sub   *Subscription
		src   *SourceState
		stale bool
	}{
		{"running a while, slot in use", &Subscription{ApplyErrors: 3, Running: true, WorkerStart: long}, &SourceState{SlotActive: true}, true},
		{"running a while, source not read", &Subscription{ApplyErrors: 3, Running: true, WorkerStart: long}, nil, true},
		{"just restarted", &Subscription{ApplyErrors: 3, Running: true, WorkerStart: just}, &SourceState{SlotActive: true}, false},
		{"not running", &Subscription{ApplyErrors: 3, WorkerStart: long}, &SourceState{SlotActive: true}, false},
		{"slot not in use", &Subscription{ApplyErrors: 3, Running: true, WorkerStart: long}, &SourceState{}, false},
		{"no errors", &Subscription{Running: true, WorkerStart: long}, &SourceState{SlotActive: true}, false},
		{"start unknown", &Subscription{ApplyErrors: 1, Running: true}, &SourceState{SlotActive: true}, false},
	} {
		st := &State{Sub: tc.sub, Source: tc.src}
		if got := st.StaleErrors(); got != tc.stale {
			t.Errorf("%s: StaleErrors() = %v, want %v", tc.name, got, tc.stale)
		}
	}
}

// TestAbortPreparedCopy: torture seed 4242 round 26. A table created
// during the follow is being copied while two prepared transactions are
// open on the source: the copy's slot waits for them, and DROP
// SUBSCRIPTION for the slot. Abort must not hang: it ends the copy's
// session and drops everything, in bounded time, and leaves the prepared
// transactions as they are. A cluster of its own: prepared transactions
// hold up every slot being created on their server.
func TestAbortPreparedCopy(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t, pgtest.Options{Settings: logicalSettings})
	o := newCase(t, c, cutoverSQL)
	following(t, o)
	exec(t, o.Source, "CREATE TABLE new26 (id int PRIMARY KEY)")
	exec(t, o.Source, "INSERT INTO new26 SELECT generate_series(1, 10)")
	waitFor(t, o.Target, "true", "SELECT (to_regclass('public.new26') IS NOT NULL)::text")
	for _, g := range []string{"p26a", "p26b"} {
		exec(t, o.Source, fmt.Sprintf("BEGIN; INSERT INTO keyed VALUES (%d, 'prepared'); PREPARE TRANSACTION '%s'", 9000+len(g)+int(g[3]), g))
	}
	// What finish's step before the fence does: the target starts
	// copying the new table, whose slot waits for the prepared ones.
	exec(t, o.Target, "ALTER SUBSCRIPTION "+o.Names.Slot+" REFRESH PUBLICATION WITH (copy_data = true)")
	if c.Version() >= 14 {
		waitFor(t, o.Source, "1", "SELECT count(*)::text FROM pg_replication_slots WHERE slot_name LIKE 'pg\\_%\\_sync\\_%'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	if _, err := Abort(ctx, o.Source, o.Target, o.Names); err != nil {
		t.Fatalf("Abort after %s: %v", time.Since(began), err)
	}
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("Abort took %s", d)
	}
	nothingLeft(t, o.Source, o.Target, o.Names)
	if v := scalar(t, o.Source, "SELECT count(*)::text FROM pg_replication_slots"); v != "0" {
		t.Errorf("%s slots left on the source", v)
	}
	if v := scalar(t, o.Source, "SELECT string_agg(gid, ',' ORDER BY gid) FROM pg_prepared_xacts"); v != "p26a,p26b" {
		t.Errorf("prepared transactions after abort: %q", v)
	}
	exec(t, o.Source, "ROLLBACK PREPARED 'p26a'")
	exec(t, o.Source, "ROLLBACK PREPARED 'p26b'")
}

// TestMatviewOverNewTable: issue 41 MEDIUM-7. A materialized view over a
// table created during the follow is computed on the target when it
// replays the CREATE, before the table's rows are copied: finish
// refreshes it there, and the comparison (materialized views included)
// passes.
func TestMatviewOverNewTable(t *testing.T) {
	t.Parallel()
	c := sharedLogical(t)
	o := newCase(t, c, cutoverSQL)
	following(t, o)
	exec(t, o.Source, "CREATE TABLE new11 (id int PRIMARY KEY, v text)")
	exec(t, o.Source, "INSERT INTO new11 SELECT i, 'r' || i FROM generate_series(1, 50) i")
	exec(t, o.Source, "CREATE MATERIALIZED VIEW mv11 AS SELECT id, v FROM new11 WHERE id % 2 = 0")
	exec(t, o.Source, "CREATE MATERIALIZED VIEW mv11b AS SELECT count(*) AS n FROM mv11")
	waitFor(t, o.Target, "true", "SELECT (to_regclass('public.mv11b') IS NOT NULL)::text")
	var out bytes.Buffer
	if _, err := Finish(context.Background(), FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: 30 * time.Second,
		Grace: time.Second, Out: &out, Verify: sameData(o.Source, o.Target)}); err != nil {
		t.Fatalf("Finish: %v\n%s", err, out.String())
	}
	if v := scalar(t, o.Target, "SELECT (SELECT count(*) FROM mv11)::text || ' ' || (SELECT n FROM mv11b)::text"); v != "25 25" {
		t.Errorf("the target's materialized views hold %q, want 25 25", v)
	}
}
