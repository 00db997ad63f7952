package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// targetSettings start a target cluster. Its launcher starts apply
// workers at most once per wal_retrieve_retry_interval (5s by default):
// tests that create several subscriptions in a row would wait for it.
var targetSettings = map[string]string{"wal_retrieve_retry_interval": "200ms",
	// finish and status quote apply errors from the log.
	"logging_collector": "on"}

// followSource and followTarget are the source and target clusters that
// the follow tests of the default PostgreSQL share (sharedFollowPair);
// TestMain stops them. Each test has databases of its own on both: the
// target database's name gives the slot's, publication's and
// subscription's. The limits leave room for the tests' slots at once,
// leftovers of killed clones included.
var (
	followSource = &pgtest.Lazy{Options: pgtest.Options{Settings: map[string]string{
		"wal_level": "logical", "max_replication_slots": "24", "max_wal_senders": "24"}}}
	followTarget = &pgtest.Lazy{Options: pgtest.Options{Settings: targetSettings}}
)

// sharedFollowPair returns the shared source and target clusters,
// started on first use.
func sharedFollowPair(t *testing.T) (src, dst *pgtest.Instance) {
	t.Helper()
	return followSource.Get(t), followTarget.Get(t)
}

// noFollowLeft fails if the source database has a slot or publication,
// or the target database a subscription, left.
func noFollowLeft(t *testing.T, src, dst string) {
	t.Helper()
	if n := pgtest.Scalar(t, src, "SELECT count(*) FROM pg_replication_slots WHERE database = current_database()"); n != "0" {
		t.Errorf("%s replication slots left on the source", n)
	}
	if n := pgtest.Scalar(t, src, "SELECT count(*) FROM pg_publication"); n != "0" {
		t.Errorf("%s publications left on the source", n)
	}
	if n := pgtest.Scalar(t, dst, "SELECT count(*) FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())"); n != "0" {
		t.Errorf("%s subscriptions left on the target", n)
	}
	for side, conn := range map[string]string{"source": src, "target": dst} {
		if n := pgtest.Scalar(t, conn, "SELECT (SELECT count(*) FROM pg_event_trigger) + (SELECT count(*) FROM pg_namespace WHERE nspname = 'pgsprint')"); n != "0" {
			t.Errorf("the DDL capture (event triggers, schema pgsprint) is left on the %s", side)
		}
	}
}

// TestFollowMessages: what clone --follow, follow status, follow finish
// (once and again after the handover) and follow abort print, with exit
// 0: the subscription followed, the table set to REPLICA IDENTITY FULL,
// the lag, the verdict with the write downtime, the fence and the
// statement that lifts it, and the lift by abort. What they do (the
// target equal under pgbench, the balance invariant, the fence ending
// sessions) is TestFollowPgbench's, in internal/follow.
func TestFollowMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc, dc := sharedFollowPair(t)
	// The target's name gives the subscription's: "app" is this test's
	// on the shared target; the source is "bench" on the shared source.
	if err := sc.CreateDB(ctx, "bench"); err != nil {
		t.Fatal(err)
	}
	if err := dc.CreateDB(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	src, dst := sc.ConnString("bench"), dc.ConnString("app")
	if err := sc.Exec(ctx, "bench", `CREATE TABLE accounts (id int PRIMARY KEY, balance int);
		CREATE TABLE history (id int, delta int);
		INSERT INTO accounts SELECT i, 0 FROM generate_series(1, 1000) i`); err != nil {
		t.Fatal(err)
	}
	r := mustPgsprint(t, "clone", "--follow", "--replica-identity-full", "-j", "2", "--source", src, "--target", dst)
	if !strings.Contains(r.stderr, "following: subscription pgsprint_app") {
		t.Errorf("clone --follow does not say it follows:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "history") {
		t.Errorf("clone does not name the table it set REPLICA IDENTITY FULL on:\n%s", r.stderr)
	}
	if err := sc.Exec(ctx, "bench", "UPDATE accounts SET balance = 5 WHERE id < 10; INSERT INTO history VALUES (1, 5)"); err != nil {
		t.Fatal(err)
	}
	st := mustPgsprint(t, "follow", "status", "--source", src, "--target", dst)
	if !strings.Contains(st.stdout, "running") || !strings.Contains(st.stdout, "lag: ") {
		t.Fatalf("status does not show a running subscription and its lag:\n%s", st.stdout)
	}
	fin := mustFinish(t, src, dst)
	t.Logf("finish said:\n%s", fin.stdout)
	if !strings.Contains(fin.stdout, "follow finish: target equals source; write downtime") {
		t.Fatalf("finish verdict:\n%s", fin.stdout)
	}
	lift := `SET default_transaction_read_only = off; ALTER DATABASE "bench" RESET default_transaction_read_only`
	if !strings.Contains(fin.stdout, "stays read-only for new sessions; to lift that, on the source: "+lift) {
		t.Errorf("finish does not say how to lift the fence:\n%s", fin.stdout)
	}
	if v := pgtest.Scalar(t, src, "SELECT current_setting('default_transaction_read_only')"); v != "on" {
		t.Errorf("the source is writable after the handover")
	}
	pgtest.RequireSameData(t, src, dst)
	noFollowLeft(t, src, dst)
	// A second finish finds the handover done and the fence still on.
	again := mustPgsprint(t, "follow", "finish", "--source", src, "--target", dst, "-j", "2")
	if !strings.Contains(again.stdout, "an earlier finish verified and handed over") || !strings.Contains(again.stdout, lift) {
		t.Errorf("finish run again:\n%s", again.stdout)
	}
	// abort lifts the fence.
	ab := mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst)
	if !strings.Contains(ab.stdout, `lifted the fence: the source database bench is writable again`) {
		t.Errorf("abort after the handover:\n%s", ab.stdout)
	}
}

// mustFinish runs follow finish and fails the test, with its report,
// unless it exits 0.
func mustFinish(t *testing.T, src, dst string) result {
	t.Helper()
	r := pgsprint(t, nil, "follow", "finish", "--source", src, "--target", dst, "-j", "2")
	if r.code != 0 {
		t.Fatalf("follow finish: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return r
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestFollowKeylessAndAbort: a table without primary key is refused
// before anything is created (exit 1, one line); a stop on DDL, a schema
// difference and an apply error are exit 1 with their line, status and
// finish saying the same; -q prints nothing; a finish killed in its
// grace leaves the fence, shown by status and lifted by abort; a clone
// interrupted (SIGINT) removes its slot and publication, a clone killed
// (SIGKILL) leaves them, and status reports them with the command that
// drops them. Following a keyless table with REPLICA IDENTITY FULL, and
// abort, are TestFollowKeyless's, in internal/follow.
func TestFollowKeylessAndAbort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc, dc := sharedFollowPair(t)
	if err := sc.CreateDB(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	if err := sc.Exec(ctx, "app", `CREATE TABLE keyed (id int PRIMARY KEY, v text);
		CREATE TABLE nokey (a int, b text);
		INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 50000) i;
		INSERT INTO nokey SELECT i, 'b' || i FROM generate_series(1, 100) i`); err != nil {
		t.Fatal(err)
	}
	src := sc.ConnString("app")
	newTarget := func(name string) string {
		if err := dc.CreateDB(ctx, name); err != nil {
			t.Fatal(err)
		}
		return dc.ConnString(name)
	}

	t.Run("refused", func(t *testing.T) {
		dst := newTarget("refused")
		r := pgsprint(t, nil, "clone", "--follow", "--source", src, "--target", dst)
		checkOneError(t, r.code, 1, r.stderr, "without primary key or replica identity (public.nokey)")
		if !strings.Contains(r.stderr, "--replica-identity-full") {
			t.Errorf("refusal does not name the options: %s", r.stderr)
		}
		noFollowLeft(t, src, dst)
		if n := pgtest.Scalar(t, dst, "SELECT count(*) FROM pg_class WHERE relname = 'keyed'"); n != "0" {
			t.Errorf("the refused clone copied anyway")
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		dst := newTarget("unreachable")
		r := pgsprint(t, nil, "clone", "--follow", "--follow-skip-no-key", "--follow-conninfo", "host=127.0.0.1 port=1 dbname=app password=sekrit-pw",
			"--source", src, "--target", dst)
		if r.code != 1 || !strings.Contains(r.stderr, "error: the target server cannot reach the source") {
			t.Fatalf("exit %d:\n%s", r.code, r.stderr)
		}
		t.Log(lastLine(r.stderr))
		if strings.Contains(r.stderr, "sekrit") {
			t.Errorf("password printed: %s", r.stderr)
		}
		noFollowLeft(t, src, dst)
		if n := pgtest.Scalar(t, dst, "SELECT count(*) FROM pg_class WHERE relname = 'keyed'"); n != "0" {
			t.Errorf("the clone copied anyway")
		}
	})

	t.Run("ddl stops", func(t *testing.T) {
		dst := newTarget("ddl")
		mustPgsprint(t, "clone", "--follow", "--follow-skip-no-key", "--source", src, "--target", dst)
		// The target would evaluate now() again: a named stop, not a
		// silent difference.
		if err := sc.Exec(ctx, "app", "ALTER TABLE keyed ADD COLUMN stamp timestamptz DEFAULT now()"); err != nil {
			t.Fatal(err)
		}
		defer sc.Exec(ctx, "app", "ALTER TABLE keyed DROP COLUMN stamp")
		const named = "DDL on the source that the target cannot follow: ALTER TABLE public.keyed (ALTER TABLE keyed ADD COLUMN stamp timestamptz DEFAULT now())"
		st := pgsprint(t, nil, "follow", "status", "--source", src, "--target", dst)
		checkOneError(t, st.code, 1, st.stderr, named)
		if !strings.Contains(st.stdout, "DDL NOT FOLLOWED: ALTER TABLE public.keyed") || !strings.Contains(st.stdout, "next: the target cannot follow the source's DDL") {
			t.Errorf("status does not show the stop:\n%s", st.stdout)
		}
		r := pgsprint(t, nil, "follow", "finish", "--source", src, "--target", dst)
		checkOneError(t, r.code, 1, r.stderr, named)
		if v := pgtest.Scalar(t, src, "SELECT current_setting('default_transaction_read_only')"); v != "off" {
			t.Errorf("the source is fenced after finish stopped on DDL")
		}
		mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst)
		noFollowLeft(t, src, dst)
	})

	t.Run("schema differs", func(t *testing.T) {
		dst := newTarget("differs")
		mustPgsprint(t, "clone", "--follow", "--follow-skip-no-key", "--source", src, "--target", dst)
		// DDL on the target is no DDL the follow carries.
		if err := dc.Exec(ctx, "differs", "CREATE TABLE added (id int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "follow", "finish", "--source", src, "--target", dst)
		checkOneError(t, r.code, 1, r.stderr, "the target differs from the source (see above): DDL: the schemas differ")
		if !strings.Contains(r.stdout, "CREATE TABLE public.added") {
			t.Errorf("finish does not show the schema difference:\n%s", r.stdout)
		}
		if !strings.Contains(r.stderr, "the source is writable again and the target still follows it") {
			t.Errorf("a failed finish does not say the source is writable again:\n%s", r.stderr)
		}
		if v := pgtest.Scalar(t, src, "SELECT current_setting('default_transaction_read_only')"); v != "off" {
			t.Errorf("the source is still fenced after a failed finish")
		}
		ab := mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst)
		if !strings.Contains(ab.stdout, "follow abort: dropped subscription pgsprint_differs on the target; dropped slot pgsprint_differs on the source; dropped publication pgsprint_differs on the source") {
			t.Errorf("abort does not say what it dropped:\n%s", ab.stdout)
		}
		noFollowLeft(t, src, dst)
	})

	t.Run("partial and quiet", func(t *testing.T) {
		if err := sc.Exec(ctx, "app", "CREATE TABLE other (id int PRIMARY KEY); INSERT INTO other SELECT generate_series(1, 10)"); err != nil {
			t.Fatal(err)
		}
		defer sc.Exec(ctx, "app", "DROP TABLE other")
		dst := newTarget("partial")
		// -q: nothing but errors, though nokey and the unlogged-free
		// selection would warn without it.
		r := mustPgsprint(t, "clone", "--follow", "-t", "keyed", "-t", "other", "-q", "--source", src, "--target", dst)
		if r.stdout != "" || r.stderr != "" {
			t.Errorf("clone --follow -q printed:\n%s%s", r.stdout, r.stderr)
		}
		if err := sc.Exec(ctx, "app", "UPDATE keyed SET v = 'p' WHERE id < 100; INSERT INTO other VALUES (11); UPDATE nokey SET b = 'not followed'"); err != nil {
			t.Fatal(err)
		}
		fin := pgsprint(t, nil, "follow", "finish", "-q", "--source", src, "--target", dst)
		if fin.code != 0 || fin.stdout != "" || fin.stderr != "" {
			t.Fatalf("follow finish -q of a partial follow: exit %d\n%s%s", fin.code, fin.stdout, fin.stderr)
		}
		for _, q := range []string{"SELECT count(*) || ' ' || count(*) FILTER (WHERE v = 'p') FROM keyed", "SELECT count(*) FROM other"} {
			if a, b := pgtest.Scalar(t, src, q), pgtest.Scalar(t, dst, q); a != b {
				t.Errorf("%s: source %s, target %s", q, a, b)
			}
		}
		noFollowLeft(t, src, dst)
		mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst) // lifts the fence
	})

	t.Run("apply error", func(t *testing.T) {
		dst := newTarget("applyerr")
		mustPgsprint(t, "clone", "--follow", "--follow-skip-no-key", "--source", src, "--target", dst)
		if err := dc.Exec(ctx, "applyerr", "INSERT INTO keyed VALUES (900000, 'target')"); err != nil {
			t.Fatal(err)
		}
		if err := sc.Exec(ctx, "app", "INSERT INTO keyed VALUES (900000, 'source')"); err != nil {
			t.Fatal(err)
		}
		defer sc.Exec(ctx, "app", "DELETE FROM keyed WHERE id = 900000")
		const quoted = `duplicate key value violates unique constraint \"keyed_pkey\"`
		deadline := time.Now().Add(30 * time.Second)
		for {
			st := pgsprint(t, nil, "follow", "status", "--source", src, "--target", dst)
			if st.code == 1 && strings.Contains(st.stderr, quoted) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status does not fail quoting the apply error: exit %d\n%s%s", st.code, st.stdout, st.stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
		began := time.Now()
		fin := pgsprint(t, nil, "follow", "finish", "--source", src, "--target", dst)
		if took := time.Since(began); took > 10*time.Second {
			t.Errorf("finish took %s to stop on an apply error", took)
		}
		checkOneError(t, fin.code, 1, fin.stderr, "the target's apply worker fails")
		if !strings.Contains(fin.stderr, quoted) {
			t.Errorf("finish does not quote the apply error:\n%s", fin.stderr)
		}
		mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst)
		noFollowLeft(t, src, dst)
	})

	t.Run("finish killed", func(t *testing.T) {
		dst := newTarget("finkilled")
		mustPgsprint(t, "clone", "--follow", "--follow-skip-no-key", "--source", src, "--target", dst)
		// An open transaction holds finish in its grace, fenced.
		tx, err := pgx.Connect(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Close(ctx)
		if _, err := tx.Exec(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		cmd, _ := startPgsprint(t, "follow", "finish", "--fence-grace", "1m", "--source", src, "--target", dst)
		fence := "SELECT count(*) FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = 'app')"
		deadline := time.Now().Add(30 * time.Second)
		for pgtest.Scalar(t, src, fence) == "0" {
			if time.Now().After(deadline) {
				t.Fatal("finish did not fence the source within 30s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		cmd.Process.Kill()
		waitExit(t, cmd)
		st := pgsprint(t, nil, "follow", "status", "--source", src, "--target", dst)
		if !strings.Contains(st.stdout, `fence: the source database app is READ-ONLY for new sessions (set by follow finish); lift it with: SET default_transaction_read_only = off; ALTER DATABASE "app" RESET default_transaction_read_only`) {
			t.Errorf("status after a killed finish does not show the fence:\n%s", st.stdout)
		}
		tx.Close(ctx)
		ab := mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst)
		if !strings.Contains(ab.stdout, "lifted the fence") {
			t.Errorf("abort after a killed finish:\n%s", ab.stdout)
		}
		noFollowLeft(t, src, dst)
		if v := pgtest.Scalar(t, src, fence); v != "0" {
			t.Errorf("abort left the fence's settings on the source")
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		dst := newTarget("interrupted")
		cmd, stderr := startPgsprint(t, "clone", "--follow", "--follow-skip-no-key", "-j", "1", "--source", src, "--target", dst)
		waitForSlot(t, src, "pgsprint_interrupted")
		cmd.Process.Signal(os.Interrupt)
		if code := waitExit(t, cmd); code != exitInterrupted {
			t.Fatalf("exit %d, want %d\n%s", code, exitInterrupted, stderr)
		}
		noFollowLeft(t, src, dst)
	})

	t.Run("killed", func(t *testing.T) {
		dst := newTarget("killed")
		cmd, _ := startPgsprint(t, "clone", "--follow", "--follow-skip-no-key", "-j", "1", "--source", src, "--target", dst)
		waitForSlot(t, src, "pgsprint_killed")
		cmd.Process.Kill()
		waitExit(t, cmd)
		waitForSlotInactive(t, src, "pgsprint_killed")
		st := pgsprint(t, nil, "follow", "status", "--source", src, "--target", dst)
		// The statements remove the DDL capture too (event triggers,
		// table, functions, schema).
		if st.code != 1 || !strings.Contains(st.stdout, "SELECT pg_drop_replication_slot('pgsprint_killed'); DROP PUBLICATION IF EXISTS \"pgsprint_killed\"; DROP EVENT TRIGGER IF EXISTS \"pgsprint_killed_ddl\"") ||
			!strings.Contains(st.stdout, `DROP SCHEMA IF EXISTS "pgsprint"`) {
			t.Fatalf("status after a killed clone, exit %d:\n%s%s", st.code, st.stdout, st.stderr)
		}
		// Another target's status lists the slot as a leftover.
		other := pgsprint(t, nil, "follow", "status", "--source", src, "--target", dc.ConnString("refused"))
		if !strings.Contains(other.stdout, "leftover slot pgsprint_killed") {
			t.Errorf("status does not list the leftover slot:\n%s", other.stdout)
		}
		mustPgsprint(t, "follow", "abort", "--source", src, "--target", dst)
		noFollowLeft(t, src, dst)
	})
}

// waitForSlot waits until the source has the (persistent) slot.
func waitForSlot(t *testing.T, conn, slot string) {
	t.Helper()
	waitForSlotWhere(t, conn, slot, "confirmed_flush_lsn IS NOT NULL", "no slot %s on the source within 30s")
}

// waitForSlotInactive waits until no walsender holds slot: a killed
// pgsprint's replication connection ends when the server notices, which
// on a loaded machine is not at once, and only inactive slots are
// leftovers.
func waitForSlotInactive(t *testing.T, conn, slot string) {
	t.Helper()
	waitForSlotWhere(t, conn, slot, "NOT active", "slot %s still active on the source after 30s")
}

func waitForSlotWhere(t *testing.T, conn, slot, cond, failure string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if pgtest.Scalar(t, conn, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '"+slot+"' AND "+cond) == "1" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf(failure, slot)
}

// TestFollowWait: clone --follow --wait stays and shows the lag until
// interrupted, which ends the watching with exit 0; the target goes on
// following, and finish hands it over equal. Following across versions
// is TestFollowCrossVersion's, in internal/follow.
func TestFollowWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sc, dc := sharedFollowPair(t)
	if err := sc.CreateDB(ctx, "waitsrc"); err != nil {
		t.Fatal(err)
	}
	if err := dc.CreateDB(ctx, "wait"); err != nil {
		t.Fatal(err)
	}
	src, dst := sc.ConnString("waitsrc"), dc.ConnString("wait")
	if err := sc.Exec(ctx, "waitsrc", `CREATE TABLE t (id serial PRIMARY KEY, v text, n numeric);
		INSERT INTO t (v, n) SELECT 'v' || i, i / 3.0 FROM generate_series(1, 1000) i`); err != nil {
		t.Fatal(err)
	}
	// --wait: the clone stays and shows the lag until interrupted, which
	// ends the watching with exit 0; the target goes on following.
	cmd := exec.Command(binary, "clone", "--follow", "--wait", "--source", src, "--target", dst)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	sawLag := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), " lag: ") {
				select {
				case sawLag <- sc.Text():
				default:
				}
			}
		}
		close(sawLag)
	}()
	select {
	case l, ok := <-sawLag:
		if !ok {
			t.Fatalf("clone --follow --wait ended without showing the lag")
		}
		t.Logf("--wait: %s", l)
	case <-time.After(time.Minute):
		t.Fatal("clone --follow --wait showed no lag within a minute")
	}
	cmd.Process.Signal(os.Interrupt)
	for range sawLag { // read standard error to its end before Wait
	}
	if code := waitExit(t, cmd); code != 0 {
		t.Fatalf("clone --follow --wait interrupted: exit %d", code)
	}
	if err := sc.Exec(ctx, "waitsrc", `INSERT INTO t (v, n) SELECT 'w' || i, i FROM generate_series(1, 100) i;
		UPDATE t SET v = 'u' WHERE id % 10 = 0; DELETE FROM t WHERE id % 13 = 0`); err != nil {
		t.Fatal(err)
	}
	fin := mustFinish(t, src, dst)
	if !strings.Contains(fin.stdout, "target equals source") {
		t.Fatalf("finish:\n%s", fin.stdout)
	}
	pgtest.RequireSameData(t, src, dst)
	noFollowLeft(t, src, dst)
}

// TestFollowUsage: options that cannot work are usage errors before any
// connection, and a password is never printed.
func TestFollowUsage(t *testing.T) {
	t.Parallel()
	src := "host=127.0.0.1 port=1 user=u dbname=s sslmode=disable"
	dst := "host=127.0.0.1 port=1 user=u dbname=d sslmode=disable"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"password without conninfo", []string{"PGPASSWORD=sekrit-pw"}, []string{"clone", "--follow", "--source", src, "--target", dst}, "give --follow-conninfo"},
		{"follow flags without follow", nil, []string{"clone", "--slot", "x", "--source", src, "--target", dst}, "go with --follow"},
		{"snapshot", nil, []string{"clone", "--follow", "--snapshot", "1-2-3", "--source", src, "--target", dst}, "does not take --snapshot"},
		{"both keyless choices", nil, []string{"clone", "--follow", "--replica-identity-full", "--follow-skip-no-key", "--source", src, "--target", dst}, "choose one"},
		{"bad slot name", nil, []string{"clone", "--follow", "--slot", "Bad-Name", "--source", src, "--target", dst}, "slot name"},
		{"finish without source", nil, []string{"follow", "finish", "--target", dst}, "--source and --target"},
		{"status without target", nil, []string{"follow", "status"}, "--target is required"},
		{"grace without fence", nil, []string{"follow", "finish", "--no-fence", "--fence-grace", "1s", "--source", src, "--target", dst}, "--fence-grace goes without --no-fence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, tc.env, tc.args...)
			checkOneError(t, r.code, exitUsage, r.stderr, tc.want)
			if strings.Contains(r.stderr+r.stdout, "sekrit") {
				t.Errorf("password printed: %s", r.stderr)
			}
		})
	}
}
