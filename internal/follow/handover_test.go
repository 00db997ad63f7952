package follow

import (
	"bytes"
	"cmp"
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// cloneStarted is Clone with clone.Run (two jobs) as its copy: the
// follow runs when it returns.
func cloneStarted(t *testing.T, o Options) *Started {
	t.Helper()
	s, err := Clone(context.Background(), o, func(ctx context.Context, snapshot string, f filter.Options) error {
		_, err := clone.Run(ctx, clone.Options{Session: dump.SessionOptions{Source: o.Source, Snapshot: snapshot}, Options: restore.Options{Target: o.Target, Jobs: 2, Filter: f, Settings: restore.Settings{NoAnalyze: true}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startPgbench runs pgbench -c 2 against conn until stop is called, at 300
// transactions a second: writes all along, as with unthrottled pgbench,
// without taking both cores from every test beside it.
func startPgbench(t *testing.T, binDir, conn string) (stop func()) {
	t.Helper()
	cmd := osexec.Command(filepath.Join(binDir, "pgbench"), "-n", "-c", "2", "-R", "300", "-T", "120", conn)
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
}

// TestFollowPgbench clones a pgbench database through Clone (REPLICA
// IDENTITY FULL for pgbench_history) while pgbench writes to it, lets the
// writes go on a few seconds after the clone, and finishes with pgbench
// still writing: the fence ends its sessions, the target must equal the
// source (schema, rows, sequences), pgbench's balance invariant must hold
// on it, and nothing of the replication may be left. A second Finish finds
// the handover done and the fence on; Abort lifts it. Scale 2 keeps it
// within seconds; PGSPRINT_FOLLOW_SCALE measures another scale.
func TestFollowPgbench(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	o := newCase(t, c, "CREATE SEQUENCE ticket; SELECT nextval('ticket') FROM generate_series(1, 7)")
	src, dst, n := o.Source, o.Target, o.Names
	srcConn, dstConn := c.ConnString(src.Database), c.ConnString(dst.Database)
	scale := cmp.Or(os.Getenv("PGSPRINT_FOLLOW_SCALE"), "2")
	init := osexec.Command(filepath.Join(c.BinDir(), "pgbench"), "-i", "-q", "-s", scale, "--foreign-keys", srcConn)
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	stop := startPgbench(t, c.BinDir(), srcConn)
	time.Sleep(time.Second)
	before := scalar(t, src, "SELECT count(*)::text FROM pgbench_history")
	o.ReplicaIdentityFull = true
	s := cloneStarted(t, o)
	if !slices.ContainsFunc(s.Identity, func(t string) bool { return strings.Contains(t, "pgbench_history") }) {
		t.Errorf("Clone does not name the table it set REPLICA IDENTITY FULL on: %v", s.Identity)
	}
	// Changes after the clone: sequences are not replicated, Finish
	// copies them.
	exec(t, src, "SELECT nextval('ticket') FROM generate_series(1, 5)")
	for i := 0; i < 3; i++ {
		time.Sleep(time.Second)
		st, err := ReadState(ctx, src, dst, n)
		if err != nil {
			t.Fatal(err)
		}
		if st.Sub == nil || !st.Sub.Enabled || st.Source == nil || !st.Source.Slot {
			t.Fatalf("ReadState under load: no running follow: %+v, source %+v", st.Sub, st.Source)
		}
		t.Logf("under load: lag %d bytes, replay lag %s", st.Source.LagBytes, st.Source.ReplayLag)
	}
	// pgbench writes on through Finish: the fence ends its sessions.
	var out bytes.Buffer
	res, err := Finish(ctx, FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute,
		Verify: sameAll(c, src.Database, dst.Database), Out: &out})
	stop()
	if err != nil {
		t.Fatalf("Finish under load: %v\n%s", err, out.String())
	}
	if !res.Followed || !res.Verified || res.Sequences < 1 {
		t.Errorf("Finish: %+v", res)
	}
	if !slices.ContainsFunc(res.Ended, func(e EndedSession) bool { return strings.Contains(e.String(), `application "pgbench"`) }) {
		t.Errorf("Finish does not name the pgbench sessions it ended: %v", res.Ended)
	}
	if !res.Fence.ReadOnly || !fenced(t, src) {
		t.Errorf("the source is writable after the handover (fence %+v)", res.Fence)
	}
	if after := scalar(t, dst, "SELECT count(*)::text FROM pgbench_history"); atoi(t, after) <= atoi(t, before) {
		t.Errorf("target holds %s history rows, the source had %s before the clone: nothing followed?", after, before)
	}
	pgtest.RequireSameSchema(t, c.BinDir(), srcConn, dstConn)
	pgtest.RequireSameData(t, srcConn, dstConn)
	if v := scalar(t, dst, "SELECT last_value::text FROM ticket"); v != "12" {
		t.Errorf("target sequence ticket at %s, want 12", v)
	}
	balances := scalar(t, dst, `SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || (SELECT sum(bbalance) FROM pgbench_branches)
		|| ' ' || (SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || (SELECT coalesce(sum(delta), 0) FROM pgbench_history)`)
	if f := strings.Fields(balances); len(f) != 4 || f[0] != f[1] || f[1] != f[2] || f[2] != f[3] {
		t.Errorf("pgbench balance invariant broken on the target: accounts, branches, tellers, history = %s", balances)
	}
	nothingLeft(t, src, dst, n)
	noCapture(t, src)
	noCapture(t, dst)
	// A second Finish finds the handover done and the fence still on.
	again, err := Finish(ctx, FinishOptions{Source: src, Target: dst, Names: n, Timeout: time.Minute, Verify: sameAll(c, src.Database, dst.Database)})
	if err != nil {
		t.Fatalf("Finish run again: %v", err)
	}
	if again.Followed || again.Verified || !again.Fence.ReadOnly {
		t.Errorf("Finish run again: %+v", again)
	}
	// Abort lifts the fence.
	d, err := Abort(ctx, src, dst, n)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Unfenced || fenced(t, src) {
		t.Errorf("Abort after the handover left the source fenced: %+v", d)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// keylessSQL is TestFollowKeyless's source: a keyed table and one
// without key.
const keylessSQL = `CREATE TABLE keyed (id int PRIMARY KEY, v text);
	CREATE TABLE nokey (a int, b text);
	INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 50000) i;
	INSERT INTO nokey SELECT i, 'b' || i FROM generate_series(1, 100) i`

// TestFollowKeyless: a table without key is followed with REPLICA
// IDENTITY FULL through updates, deletes and a TRUNCATE after the clone;
// Abort of a running follow removes everything and is idempotent; a
// follow of a selection (-t) carries the selected tables' changes and
// leaves the rest.
func TestFollowKeyless(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)

	t.Run("replica identity full", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, keylessSQL)
		o.ReplicaIdentityFull = true
		s := cloneStarted(t, o)
		if !slices.ContainsFunc(s.Identity, func(t string) bool { return strings.Contains(t, "nokey") }) {
			t.Errorf("Clone does not name nokey as set to REPLICA IDENTITY FULL: %v", s.Identity)
		}
		exec(t, o.Source, `UPDATE nokey SET b = 'changed' WHERE a <= 10; DELETE FROM nokey WHERE a > 90;
			INSERT INTO nokey VALUES (1000, 'new'); UPDATE keyed SET v = 'x' WHERE id % 7 = 0; TRUNCATE keyed`)
		if _, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute, Verify: sameData(o.Source, o.Target)}); err != nil {
			t.Fatal(err)
		}
		pgtest.RequireSameData(t, c.ConnString(o.Source.Database), c.ConnString(o.Target.Database))
		nothingLeft(t, o.Source, o.Target, o.Names)
		noCapture(t, o.Source)
		noCapture(t, o.Target)
	})

	t.Run("abort", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, keylessSQL)
		o.SkipNoKey = true
		cloneStarted(t, o)
		if v := scalar(t, o.Target, "SELECT count(*)::text FROM pg_subscription WHERE subname = $1", o.Names.Slot); v != "1" {
			t.Fatalf("%s subscriptions on the target after Clone", v)
		}
		for i := 0; i < 2; i++ { // idempotent
			d, err := Abort(ctx, o.Source, o.Target, o.Names)
			if err != nil {
				t.Fatalf("Abort %d: %v", i+1, err)
			}
			if first := i == 0; d.Subscription != first || d.Slot != first || d.Publication != first {
				t.Errorf("Abort %d dropped %+v", i+1, d)
			}
			nothingLeft(t, o.Source, o.Target, o.Names)
			noCapture(t, o.Source)
			noCapture(t, o.Target)
		}
	})

	t.Run("partial", func(t *testing.T) {
		t.Parallel()
		o := newCase(t, c, keylessSQL+"; CREATE TABLE other (id int PRIMARY KEY); INSERT INTO other SELECT generate_series(1, 10)")
		o.Filter = filter.Options{Selection: filter.Selection{Tables: []string{"keyed", "other"}}}
		cloneStarted(t, o)
		exec(t, o.Source, "UPDATE keyed SET v = 'p' WHERE id < 100; INSERT INTO other VALUES (11); UPDATE nokey SET b = 'not followed'")
		res, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute, Verify: sameAll(c, o.Source.Database, o.Target.Database)})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Verified {
			t.Errorf("Finish: %+v", res)
		}
		for _, q := range []string{"SELECT count(*) || ' ' || count(*) FILTER (WHERE v = 'p') FROM keyed", "SELECT count(*)::text FROM other"} {
			if a, b := scalar(t, o.Source, q), scalar(t, o.Target, q); a != b {
				t.Errorf("%s: source %s, target %s", q, a, b)
			}
		}
		if v := scalar(t, o.Target, "SELECT count(*)::text FROM pg_class WHERE relname = 'nokey'"); v != "0" {
			t.Errorf("nokey, not selected, is on the target")
		}
		nothingLeft(t, o.Source, o.Target, o.Names)
		if _, err := Abort(ctx, o.Source, o.Target, o.Names); err != nil { // lifts the fence
			t.Fatal(err)
		}
	})
}

// TestFollowCrossVersion follows a source of the oldest installed major
// from a target of the newest (13 → 18, the upgrade this is for): rows
// inserted, updated and deleted after the clone reach the target, and
// Finish leaves both equal and nothing of the replication.
func TestFollowCrossVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	versions := pgtest.Versions()
	if len(versions) < 2 {
		msg := "need 2 PostgreSQL major versions, have " + strconv.Itoa(len(versions))
		if os.Getenv(pgtest.EnvRequire) != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	oldBin, err := pgtest.BinDirFor(versions[0])
	if err != nil {
		t.Fatal(err)
	}
	newBin, err := pgtest.BinDirFor(versions[len(versions)-1])
	if err != nil {
		t.Fatal(err)
	}
	sc := newLogical(t, oldBin)
	dc := pgtest.New(t, pgtest.Options{BinDir: newBin, Settings: map[string]string{"wal_retrieve_retry_interval": "200ms", "logging_collector": "on"}})
	for _, c := range []*pgtest.Instance{sc, dc} {
		if err := c.CreateDB(ctx, "app"); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Exec(ctx, "app", `CREATE TABLE t (id serial PRIMARY KEY, v text, n numeric);
		INSERT INTO t (v, n) SELECT 'v' || i, i / 3.0 FROM generate_series(1, 1000) i`); err != nil {
		t.Fatal(err)
	}
	names, err := Names{}.Resolve("app")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Source: config(t, sc.ConnString("app")), Target: config(t, dc.ConnString("app")), Names: names}
	following(t, o)
	exec(t, o.Source, `INSERT INTO t (v, n) SELECT 'w' || i, i FROM generate_series(1, 100) i;
		UPDATE t SET v = 'u' WHERE id % 10 = 0; DELETE FROM t WHERE id % 13 = 0`)
	st, err := ReadState(ctx, o.Source, o.Target, o.Names)
	if err != nil || st.Sub == nil || st.Source == nil || !st.Source.Slot {
		t.Fatalf("ReadState %d → %d: %+v (%v)", versions[0], versions[len(versions)-1], st, err)
	}
	res, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute, Verify: sameData(o.Source, o.Target)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.SourceMajor != versions[0] || res.TargetMajor != versions[len(versions)-1] {
		t.Errorf("Finish: %+v", res)
	}
	pgtest.RequireSameData(t, sc.ConnString("app"), dc.ConnString("app"))
	nothingLeft(t, o.Source, o.Target, o.Names)
	noCapture(t, o.Source)
	noCapture(t, o.Target)
}
