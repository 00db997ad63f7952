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

	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// following clones o's source into its target with Clone and waits until
// the target's apply worker runs.
func following(t *testing.T, o Options) {
	t.Helper()
	ctx := context.Background()
	if _, err := Clone(ctx, o, func(ctx context.Context, snapshot string, f filter.Options) error {
		_, err := clone.Run(ctx, clone.Options{Session: dump.SessionOptions{Source: o.Source, Snapshot: snapshot}, Options: restore.Options{Target: o.Target, Jobs: 2, Filter: f, Settings: restore.Settings{NoAnalyze: true}}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, o.Target, "1", "SELECT count(*)::text FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL", o.Names.Slot)
}

// sameData is a Verify that compares the fingerprints of both sides.
func sameData(src, dst *pgx.ConnConfig) func(context.Context, Verification) error {
	return func(ctx context.Context, _ Verification) error {
		a, err := compare.FingerprintParallel(ctx, src, 2)
		if err != nil {
			return err
		}
		b, err := compare.FingerprintParallel(ctx, dst, 2)
		if err != nil {
			return err
		}
		if d := compare.FingerprintDiff(a, b); len(d) > 0 {
			return fmt.Errorf("differ: %s", strings.Join(d, "; "))
		}
		return nil
	}
}

// fenced reports whether a new session of cfg's database is read-only.
func fenced(t *testing.T, cfg *pgx.ConnConfig) bool {
	t.Helper()
	return scalar(t, cfg, "SHOW default_transaction_read_only") == "on"
}

// TestFinishFenced: a writer inserts on the source all through Finish,
// reconnecting whenever its session ends. The fence ends its session
// (named in the output), its new sessions are read-only, every row it
// committed is on the target, the target equals the source, and the
// source stays fenced after the handover until the printed statement
// lifts it; a second Finish and an Abort are safe.
func TestFinishFenced(t *testing.T) {
	t.Parallel()
	c := sharedLogical(t)
	t.Run("kinds", func(t *testing.T) { t.Parallel(); testKinds(t, c) })
	t.Run("writer", func(t *testing.T) { t.Parallel(); testWriter(t, c) })
	t.Run("large objects", func(t *testing.T) { t.Parallel(); testLargeObjects(t, c) })
	t.Run("no fence", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, sourceSQL)
		o.SkipNoKey = true
		following(t, o)
		exec(t, o.Source, "UPDATE keyed SET v = 'nofence' WHERE id < 10")
		var out bytes.Buffer
		res, err := Finish(context.Background(), FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute,
			NoFence: true, Out: &out, Verify: sameData(o.Source, o.Target)})
		if err != nil || !res.Verified || res.Fence.ReadOnly || len(res.Ended) != 0 || out.Len() != 0 {
			t.Fatalf("Finish --no-fence: %+v, %v\n%s", res, err, out.String())
		}
		if fenced(t, o.Source) {
			t.Error("--no-fence fenced the source")
		}
		nothingLeft(t, o.Source, o.Target, o.Names)
	})
}

func testWriter(t *testing.T, c *pgtest.Instance) {
	ctx := context.Background()
	o := newCase(t, c, sourceSQL)
	src, dst, n := o.Source, o.Target, o.Names
	o.SkipNoKey = true
	following(t, o)

	var mu sync.Mutex
	var committed []int
	refused := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(ctx)
			}
		}()
		for id := 100000; ; id++ {
			select {
			case <-stop:
				return
			default:
			}
			if conn == nil || conn.IsClosed() {
				var err error
				if conn, err = pg.Connect(ctx, src); err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
			}
			_, err := conn.Exec(ctx, "INSERT INTO keyed VALUES ($1, 'during finish')", id)
			mu.Lock()
			if err == nil {
				committed = append(committed, id)
			} else if strings.Contains(err.Error(), "read-only transaction") {
				refused++
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	var out bytes.Buffer
	res, err := Finish(ctx, FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Grace: time.Second,
		Out: &out, Verify: sameData(src, dst)})
	time.Sleep(200 * time.Millisecond) // the writer meets the fence
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("Finish: %v\n%s", err, out.String())
	}
	t.Logf("Finish: %+v\n%s", res, out.String())
	if !res.Followed || !res.Verified || !res.Fence.Ours(n.Slot) || len(res.Ended) == 0 || res.WriteDowntime <= 0 {
		t.Errorf("Finish: %+v", res)
	}
	if !strings.Contains(out.String(), "fence: ended source session pid") || !strings.Contains(out.String(), "application \"pgsprint\"") {
		t.Errorf("the ended session is not named:\n%s", out.String())
	}
	mu.Lock()
	if len(committed) == 0 || refused == 0 {
		t.Errorf("writer: %d rows committed, %d refused as read-only: the test did not write through the fence", len(committed), refused)
	}
	got := scalar(t, dst, "SELECT count(*)::text FROM keyed WHERE id >= 100000")
	if got != fmt.Sprint(len(committed)) {
		t.Errorf("target holds %s rows written during finish, the writer committed %d", got, len(committed))
	}
	mu.Unlock()
	if d := compare.FingerprintDiff(fingerprint(t, src), fingerprint(t, dst)); len(d) > 0 {
		t.Errorf("target differs from the source:\n%s", strings.Join(d, "\n"))
	}
	nothingLeft(t, src, dst, n)
	if !fenced(t, src) {
		t.Error("the source is writable after the handover")
	}
	// Run again: nothing to do, the fence stays and says so.
	again, err := Finish(ctx, FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Verify: sameData(src, dst)})
	if err != nil || again.Followed || again.Verified || !again.Fence.Ours(n.Slot) {
		t.Errorf("Finish again: %+v, %v", again, err)
	}
	withConn(t, src, func(ctx context.Context, conn *pgx.Conn) {
		for _, q := range strings.Split(res.Fence.LiftSQL(), "; ") { // as psql sends them
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})
	if fenced(t, src) {
		t.Error("the lift statement does not lift the fence")
	}
	// The lift removes the marker too: a read-only setting the DBA
	// makes later is not taken for this follow's fence.
	exec(t, src, "ALTER DATABASE "+pg.Ident(res.Fence.Database)+" SET default_transaction_read_only = on")
	withConn(t, src, func(ctx context.Context, conn *pgx.Conn) {
		f, err := readFence(ctx, conn)
		if err != nil || !f.ReadOnly || f.Ours(n.Slot) || f.Slot != "" {
			t.Errorf("after the printed lift and a DBA's own read-only setting: %+v, %v", f, err)
		}
	})
	if d, err := Abort(ctx, src, dst, n); err != nil || d.Unfenced || !d.Fence.ReadOnly {
		t.Errorf("abort over a DBA's read-only setting: %+v, %v", d, err)
	}
	withConn(t, src, func(ctx context.Context, conn *pgx.Conn) {
		for _, q := range strings.Split(res.Fence.LiftSQL(), "; ") {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	})
}

// TestFinishFails: a failure at each step before the handover (a
// difference, a context cancelled while verifying or while waiting
// through the grace, an apply error on the target) lifts the fence and
// keeps the follow; a fence left by a killed finish is found by the next
// finish or abort, and abort lifts it and says what it dropped.
func TestFinishFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	for _, tc := range []struct {
		name string
		// run calls Finish as the case fails it.
		run  func(t *testing.T, o FinishOptions) error
		want string
		// rerun: after the killed finish's fence, finish again (else
		// abort).
		rerun bool
	}{
		{name: "difference", want: "the rows differ", rerun: true, run: func(t *testing.T, o FinishOptions) error {
			o.Verify = func(context.Context, Verification) error { return errors.New("the rows differ") }
			_, err := Finish(ctx, o)
			return err
		}},
		{name: "cancelled while verifying", want: "cancel", rerun: true, run: func(t *testing.T, o FinishOptions) error {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			o.Verify = func(ctx context.Context, _ Verification) error {
				if !fenced(t, o.Source) {
					t.Error("not fenced while verifying")
				}
				cancel()
				_, err := compare.FingerprintParallel(ctx, o.Source, 1)
				return err
			}
			_, err := Finish(cctx, o)
			return err
		}},
		{name: "cancelled in the grace", want: context.Canceled.Error(), run: func(t *testing.T, o FinishOptions) error {
			// An open transaction holds Finish in the grace.
			withConn(t, o.Source, func(_ context.Context, conn *pgx.Conn) {
				if _, err := conn.Exec(ctx, "BEGIN; SELECT 1"); err != nil {
					t.Fatal(err)
				}
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				o.Grace = time.Minute
				_, err := Finish(cctx, o)
				if err == nil {
					t.Fatal("Finish ended its grace early")
				}
				if !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
					t.Errorf("error %v", err)
				}
			})
			return errors.New(context.Canceled.Error() + " writable again")
		}},
		{name: "apply error", want: "duplicate key value violates unique constraint", run: func(t *testing.T, o FinishOptions) error {
			exec(t, o.Target, "INSERT INTO keyed VALUES (5000, 'target')")
			exec(t, o.Source, "INSERT INTO keyed VALUES (5000, 'source')")
			began := time.Now()
			_, err := Finish(ctx, o)
			if d := time.Since(began); d > 10*time.Second {
				t.Errorf("Finish took %s to stop on an apply error", d)
			}
			st, serr := ReadState(ctx, o.Source, o.Target, o.Names)
			if serr != nil || st.Sub == nil || st.Sub.ApplyErrors < 1 || !strings.Contains(st.Sub.LastError, "duplicate key") {
				t.Errorf("ReadState after an apply error: %+v, %v", st.Sub, serr)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := newCase(t, c, sourceSQL)
			o.SkipNoKey = true
			src, dst, n := o.Source, o.Target, o.Names
			following(t, o)
			fo := FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Grace: time.Second, Verify: sameData(src, dst)}
			err := tc.run(t, fo)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "writable") {
				t.Fatalf("Finish: %v, want an error saying %q and that the source is writable (again)", err, tc.want)
			}
			if fenced(t, src) {
				t.Error("the source is still fenced after a failed finish")
			}
			if v := scalar(t, src, "SELECT count(*)::text FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())"); v != "0" {
				t.Errorf("the fence's settings are left on the source database")
			}
			if v := scalar(t, dst, "SELECT count(*)::text FROM pg_subscription WHERE subname = $1", n.Slot); v != "1" {
				t.Error("the follow is gone after a failed finish")
			}
			// A finish killed after fencing leaves the fence: status
			// shows it, abort lifts it and says what it dropped.
			withConn(t, src, func(ctx context.Context, conn *pgx.Conn) {
				if err := setFence(ctx, conn, conn.Config().Database, n.Slot); err != nil {
					t.Fatal(err)
				}
			})
			st, err := ReadState(ctx, src, dst, n)
			if err != nil || !st.Source.Fence.Ours(n.Slot) {
				t.Fatalf("ReadState does not see the fence: %+v, %v", st.Source, err)
			}
			want := Dropped{Subscription: true, Slot: true, Publication: true, Unfenced: true}
			if tc.rerun {
				var out bytes.Buffer
				fo.Out = &out
				res, err := Finish(ctx, fo)
				if err != nil || !res.Followed || !res.Fence.Ours(n.Slot) || !strings.Contains(out.String(), "still fenced by an earlier finish") {
					t.Fatalf("Finish behind a killed finish's fence: %+v, %v\n%s", res, err, out.String())
				}
				if d := compare.FingerprintDiff(fingerprint(t, src), fingerprint(t, dst)); len(d) > 0 {
					t.Errorf("target differs from the source:\n%s", strings.Join(d, "\n"))
				}
				want = Dropped{Unfenced: true}
			}
			d, err := Abort(ctx, src, dst, n)
			if err != nil {
				t.Fatal(err)
			}
			if d.Fence.Database == "" || *d != (Dropped{Subscription: want.Subscription, Slot: want.Slot, Publication: want.Publication, Unfenced: true, Fence: Fence{Database: d.Fence.Database}}) {
				t.Errorf("Abort: %+v, want %+v", d, want)
			}
			nothingLeft(t, src, dst, n)
			if fenced(t, src) {
				t.Error("abort left the source fenced")
			}
			d, err = Abort(ctx, src, dst, n)
			if err != nil || *d != (Dropped{Fence: Fence{Database: d.Fence.Database}}) {
				t.Errorf("Abort again: %+v, %v", d, err)
			}
		})
	}
}

// TestFenceEndsStartingSession: a session that read the source
// database's settings before the fence, and so may write, but shows in
// pg_stat_activity only later (post_auth_delay holds it between the
// two) is ended by the fence all the same: its insert never commits,
// finish completes, and the source stays fenced. On code that listed
// pg_stat_activity only, the session wrote after the catch-up (finish
// refused, "writes that went on") or after the handover (a write lost).
func TestFenceEndsStartingSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A server of its own: post_auth_delay sleeps in pg_usleep, which a
	// signal cuts short, and on the shared server other tests' DDL fills
	// the invalidation queue, whose catch-up signal then woke the
	// session early, before the fence.
	c := newLogical(t, "")
	o := newCase(t, c, cutoverSQL)
	following(t, o)
	late := o.Source.Copy()
	// Seconds, after the settings are read: far longer than finish takes
	// to reach the fence, even on a loaded machine. The fence ends the
	// session during its delay; the code before waited it out.
	late.RuntimeParams["post_auth_delay"] = "20"
	late.RuntimeParams["application_name"] = "late_writer"
	wrote := make(chan error, 1)
	var connected time.Time // when the session was through its start-up
	go func() {
		conn, err := pgx.ConnectConfig(ctx, late)
		connected = time.Now()
		if err != nil {
			wrote <- err
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "INSERT INTO keyed VALUES (7001, 'late')")
		wrote <- err
	}()
	// The session holds the database's connection lock while unseen.
	waitFor(t, o.Source, "1", `SELECT count(*)::text FROM pg_locks l WHERE locktype = 'object'
		AND classid = 'pg_database'::regclass AND NOT EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.pid)`)
	time.Sleep(500 * time.Millisecond) // past reading the settings, into the delay
	var out bytes.Buffer
	_, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute,
		Grace: 500 * time.Millisecond, Out: &out, Verify: sameData(o.Source, o.Target)})
	if err != nil {
		t.Fatalf("Finish: %v\n%s", err, out.String())
	}
	select {
	case err := <-wrote:
		switch {
		case err == nil && len(lost(t, o.Target, []int{7001})) > 0:
			t.Errorf("the session that started before the fence wrote after it, and the row is not on the target: a lost write (through its start-up at %s)", connected.Format(time.TimeOnly))
		case err == nil:
			// A signal woke pg_usleep early: the session wrote before the
			// fence, and its row followed. Nothing was lost.
			t.Logf("the session's start-up delay was cut short: it wrote before the fence, and the row is on the target")
		case !strings.Contains(out.String(), "still starting"):
			t.Errorf("the session failed (%v), but finish did not name the starting session it ended:\n%s", err, out.String())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the late session neither wrote nor failed in 45s")
	}
	if !fenced(t, o.Source) {
		t.Error("the source is writable after the handover")
	}
}
