package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// round is one clone --follow, its DDL, faults and finishes, in a source
// database rN (a copy of torture_base) and a target database tN.
type round struct {
	t                    *torture
	n                    int
	rng                  *rand.Rand
	srcDB, dstDB, slot   string
	src, dst, followConn string
	load                 *load
	ran                  []ranDDL
	prepared             []*prepared
	hbaFile, hbaOrig     string     // the source's pg_hba.conf while it rejects the subscription
	conflict             int64      // an id put on the target ahead of the logger, 0 for none
	mu                   sync.Mutex // notes and kills, from the killers' goroutines
	notes                []string
	finished, aborted    bool
}

// ranDDL is a corpus statement that ran on the source.
type ranDDL struct {
	text  string
	class class
}

// prepared is a PREPARE TRANSACTION left open on the source.
type prepared struct {
	gid    string
	id     int64 // the acked id it inserts
	commit bool  // its fate: committed later, or rolled back
	open   bool
}

func newRound(t *torture, n int) *round {
	r := &round{t: t, n: n, rng: rand.New(rand.NewPCG(t.cfg.seed, uint64(n)))}
	r.srcDB, r.dstDB = fmt.Sprintf("r%d", n), fmt.Sprintf("t%d", n)
	r.slot = "pgsprint_" + r.dstDB
	r.src, r.dst = t.src.ConnString(r.srcDB), t.dst.ConnString(r.dstDB)
	r.followConn = pgctl.KeywordConnString(map[string]string{"host": "127.0.0.1", "port": strconv.Itoa(t.src.Port()),
		"user": pgctl.SuperuserName, "dbname": r.srcDB, "password": pgctl.SuperuserPassword, "sslmode": "disable"})
	return r
}

// fail reports an invariant break: seed, round, one line.
func (r *round) fail(format string, args ...any) {
	r.t.breaks++
	msg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " | ")
	fmt.Fprintf(r.t.cfg.out, "BREAK seed=%d round=%d: %s\n", r.t.cfg.seed, r.n, msg)
}

func (r *round) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *round) summary() string {
	return strings.Join(r.notes, "; ")
}

// hasClass says whether a statement of class c ran.
func (r *round) hasClass(c class) bool {
	for _, d := range r.ran {
		if d.class == c {
			return true
		}
	}
	return false
}

func (r *round) firstOf(c class) string {
	for _, d := range r.ran {
		if d.class == c {
			return oneLine(d.text)
		}
	}
	return ""
}

func (r *round) run(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := r.t.src.Exec(ctx, "postgres", "CREATE DATABASE "+r.srcDB+" TEMPLATE torture_base"); err != nil {
		r.fail("harness: create the source database: %v", err)
		return
	}
	if err := r.t.dst.Exec(ctx, "postgres", "CREATE DATABASE "+r.dstDB); err != nil {
		r.fail("harness: create the target database: %v", err)
		return
	}
	r.load = startLoad(ctx, r.src, r.t.cfg.seed+uint64(r.n))
	pause(ctx, 200*time.Millisecond)
	res := r.pgsprint(ctx, time.Minute, "clone", "--follow", "-q", "-j", "2", "--source", r.src, "--target", r.dst, "--follow-conninfo", r.followConn)
	if res.code != 0 {
		r.fail("clone --follow exit %d: %s", res.code, res.lastLine())
		return
	}
	r.ddl(ctx)
	r.prepare(ctx)
	r.faults(ctx)
	pause(ctx, time.Duration(200+r.rng.IntN(600))*time.Millisecond)
	r.chaos(ctx)
	r.afterChaos(ctx)
	r.dba(ctx)
	r.final(ctx)
}

// ddl runs up to three corpus entries; in about a third of the rounds
// one of them must stop the follow or may.
func (r *round) ddl(ctx context.Context) {
	var picks []entry
	var plain, other []entry
	for _, e := range corpus {
		if e.class == replayed {
			plain = append(plain, e)
		} else {
			other = append(other, e)
		}
	}
	for range r.rng.IntN(4) {
		picks = append(picks, plain[r.rng.IntN(len(plain))])
	}
	if r.rng.IntN(3) == 0 {
		picks = append(picks, other[r.rng.IntN(len(other))])
	}
	if len(picks) == 0 {
		return
	}
	conn, err := connect(ctx, r.src)
	if err != nil {
		r.fail("harness: connect for DDL: %v", err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET statement_timeout = '30s'"); err != nil {
		r.fail("harness: %v", err)
		return
	}
	for i, e := range picks {
		n := 10 + i
		ok := true
		for _, q := range e.pre {
			if _, err := conn.Exec(ctx, expand(q, n)); err != nil {
				r.note("pre of %q failed: %v", oneLine(expand(e.stmt, n)), err)
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		stmt := expand(e.stmt, n)
		if _, err := conn.Exec(ctx, stmt); err != nil && !e.mayFail {
			r.note("%q failed on the source: %v", oneLine(stmt), err)
			continue
		}
		r.ran = append(r.ran, ranDDL{stmt, e.class})
		for _, q := range e.post {
			if _, err := conn.Exec(ctx, expand(q, n)); err != nil {
				r.note("post %q failed: %v", oneLine(expand(q, n)), err)
			}
		}
	}
	for _, d := range r.ran {
		r.note("DDL %s: %s", d.class, oneLine(d.text))
	}
}

// prepare leaves one or two prepared transactions open in a quarter of
// the rounds; each is committed later or rolled back.
func (r *round) prepare(ctx context.Context) {
	if r.rng.IntN(4) != 0 {
		return
	}
	for k := range 1 + r.rng.IntN(2) {
		p := &prepared{gid: fmt.Sprintf("torture_%d_%d", r.n, k), id: r.load.reserve(), commit: r.rng.IntN(2) == 0}
		conn, err := connect(ctx, r.src)
		if err != nil {
			r.fail("harness: connect for 2PC: %v", err)
			return
		}
		_, err = conn.Exec(ctx, fmt.Sprintf("BEGIN; INSERT INTO acked (id) VALUES (%d); PREPARE TRANSACTION '%s'", p.id, p.gid))
		conn.Close(context.Background())
		if err != nil {
			r.fail("harness: prepare a transaction: %v", err)
			return
		}
		p.open = true
		r.prepared = append(r.prepared, p)
		r.note("prepared %s (commit later: %v)", p.gid, p.commit)
	}
	// Sometimes the first is committed while the follow runs.
	if r.rng.IntN(3) == 0 && r.prepared[0].commit {
		r.resolvePrepared(ctx, r.prepared[0])
	}
}

// resolvePrepared commits or rolls back p as its fate says; a commit
// acknowledged is an acknowledged write.
func (r *round) resolvePrepared(ctx context.Context, p *prepared) {
	if !p.open {
		return
	}
	verb := "ROLLBACK PREPARED"
	if p.commit {
		verb = "COMMIT PREPARED"
	}
	conn, err := connect(ctx, r.src)
	if err == nil {
		_, err = conn.Exec(ctx, verb+" '"+p.gid+"'")
		conn.Close(context.Background())
	}
	if err != nil {
		r.fail("harness: %s %s: %v", verb, p.gid, err)
		return
	}
	p.open = false
	if p.commit {
		r.load.ack(p.id)
	}
	r.note("%s %s", strings.ToLower(verb), p.gid)
}

func (r *round) openPrepared() bool {
	for _, p := range r.prepared {
		if p.open {
			return true
		}
	}
	return false
}

// faults makes the apply worker fail in some rounds: the source's
// pg_hba.conf rejects the subscription's address and its walsender is
// ended, or the target gets a row the source's next inserts conflict
// with.
func (r *round) faults(ctx context.Context) {
	hba, conflict := r.rng.IntN(7) == 0, r.rng.IntN(7) == 0
	if !hba && !conflict {
		return
	}
	r.t.applyFailures++
	if conflict {
		r.conflict = r.load.ahead(20)
		if err := r.t.dst.Exec(ctx, r.dstDB, fmt.Sprintf("INSERT INTO acked (id) VALUES (%d)", r.conflict)); err != nil {
			r.fail("harness: conflicting row on the target: %v", err)
			r.conflict = 0
		} else {
			r.note("conflicting row %d on the target", r.conflict)
		}
	}
	if hba {
		if err := r.rejectSubscription(ctx); err != nil {
			r.fail("harness: reject the subscription: %v", err)
		} else {
			r.note("pg_hba rejects the subscription")
		}
	}
}

func (r *round) rejectSubscription(ctx context.Context) error {
	conn, err := connect(ctx, r.t.src.ConnString("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SHOW hba_file").Scan(&r.hbaFile); err != nil {
		return err
	}
	orig, err := os.ReadFile(r.hbaFile)
	if err != nil {
		return err
	}
	r.hbaOrig = string(orig)
	if err := os.WriteFile(r.hbaFile, []byte("host "+r.srcDB+" all 127.0.0.1/32 reject\n"+r.hbaOrig), 0o600); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	pause(ctx, 100*time.Millisecond)
	// The walsender ends; the worker's reconnections are refused.
	deadline := time.Now().Add(10 * time.Second)
	inactiveSince := time.Time{}
	for time.Now().Before(deadline) {
		var active bool
		if err := conn.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(active_pid)), false) FROM pg_replication_slots
			WHERE slot_name = $1 AND active_pid IS NOT NULL`, r.slot).Scan(&active); err != nil {
			return err
		}
		switch {
		case active:
			inactiveSince = time.Time{}
		case inactiveSince.IsZero():
			inactiveSince = time.Now()
		case time.Since(inactiveSince) > 800*time.Millisecond:
			return nil
		}
		pause(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("the slot's walsender came back through the rejecting pg_hba.conf")
}

// fixFaults is the DBA's repair: pg_hba.conf as it was, the target's
// conflicting row deleted and its error count reset.
func (r *round) fixFaults(ctx context.Context) {
	if r.hbaFile != "" {
		err := os.WriteFile(r.hbaFile, []byte(r.hbaOrig), 0o600)
		if err == nil {
			err = r.t.src.Exec(ctx, "postgres", "SELECT pg_reload_conf()")
		}
		if err != nil {
			r.fail("harness: restore pg_hba.conf: %v", err)
		}
		r.hbaFile = ""
		r.note("pg_hba fixed")
	}
	if r.conflict != 0 {
		if err := r.t.dst.Exec(ctx, r.dstDB, fmt.Sprintf("DELETE FROM acked WHERE id = %d", r.conflict)); err != nil {
			r.fail("harness: delete the conflicting row on the target: %v", err)
		}
		r.conflict = 0
		r.note("conflict fixed")
		pause(ctx, 500*time.Millisecond)
	}
	r.t.dst.Exec(ctx, r.dstDB, "SELECT pg_stat_reset_subscription_stats(oid) FROM pg_subscription")
}

// result is a finished pgsprint run.
type result struct {
	code           int
	stdout, stderr string
}

func (res result) lastLine() string {
	s := strings.TrimSpace(res.stderr)
	if s == "" {
		s = strings.TrimSpace(res.stdout)
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// proc is a pgsprint run in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	res            result
	began, ended   time.Time
}

func (r *round) start(ctx context.Context, timeout time.Duration, args ...string) *proc {
	p := &proc{done: make(chan struct{}), began: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	p.cmd = exec.CommandContext(ctx, r.t.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	if err := p.cmd.Start(); err != nil {
		cancel()
		p.res = result{code: -1, stderr: err.Error()}
		close(p.done)
		return p
	}
	go func() {
		defer cancel()
		err := p.cmd.Wait()
		p.ended = time.Now()
		p.res = result{code: p.cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
		if err != nil && p.res.code == 0 {
			p.res.code = -1
		}
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.code = -int(ws.Signal())
		}
		close(p.done)
	}()
	return p
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (r *round) pgsprint(ctx context.Context, timeout time.Duration, args ...string) result {
	p := r.start(ctx, timeout, args...)
	<-p.done
	r.checkOutput(args, p.res)
	return p.res
}

// checkOutput: an exit is 0 or 1 with one line of error, never a panic.
func (r *round) checkOutput(args []string, res result) {
	if res.code < 0 {
		return // killed
	}
	what := strings.Join(args[:2], " ")
	if strings.Contains(res.stderr, "panic:") || strings.Contains(res.stderr, "goroutine ") {
		r.fail("%s panicked: %s", what, res.lastLine())
	}
	if res.code > 1 {
		r.fail("%s exit %d: %s", what, res.code, res.lastLine())
	}
}

func (r *round) finishArgs(grace time.Duration) []string {
	args := []string{"follow", "finish", "-j", "2", "--timeout", "10s", "--fence-grace", grace.String(), "--source", r.src, "--target", r.dst}
	if r.t.stall {
		args = append(args, "--stall-timeout", "3s")
	}
	return args
}

// chaos runs follow finish, in two rounds of five with a second finish
// racing it, and kills either with SIGKILL at a random moment in half
// the runs.
func (r *round) chaos(ctx context.Context) {
	watch := r.watchFence(ctx)
	var procs []*proc
	var wg sync.WaitGroup
	launch := func() {
		p := r.start(ctx, 2*time.Minute, r.finishArgs(time.Duration(r.rng.IntN(1000))*time.Millisecond)...)
		procs = append(procs, p)
		if r.rng.IntN(2) == 0 {
			delay := time.Duration(r.rng.IntN(3000)) * time.Millisecond
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-p.done:
				case <-time.After(delay):
					if p.cmd.Process != nil && p.cmd.Process.Kill() == nil {
						r.mu.Lock()
						r.t.kills++
						r.mu.Unlock()
						r.note("finish killed after %s", delay)
					}
				}
			}()
		}
	}
	if r.rng.IntN(3) == 0 {
		// Long enough to span finish's checks before the fence and the
		// grace (a session visible by then is ended as any other), and
		// often the whole finish.
		delay := 5 + r.rng.IntN(6)
		r.load.late(ctx, delay)
		r.t.lateSessions++
		r.note("a session starting across the fence (post_auth_delay %ds)", delay)
		pause(ctx, 100*time.Millisecond)
	}
	launch()
	if r.rng.IntN(5) < 2 {
		pause(ctx, time.Duration(r.rng.IntN(1500))*time.Millisecond)
		launch()
		if procs[0].running() {
			r.t.races++
			r.note("two finishes raced")
		}
	}
	wg.Wait()
	for _, p := range procs {
		<-p.done
		r.checkOutput([]string{"follow", "finish"}, p.res)
		r.note("finish exit %d: %s", p.res.code, p.res.lastLine())
	}
	r.checkFenceWatch(watch.stop(), "a chaos finish")
	for _, p := range procs {
		if p.res.code == 0 {
			r.finished = true
		}
	}
}

// dba does what a DBA would after the chaos: run finish again, fix
// what it fails on, and abort when the follow cannot finish.
func (r *round) dba(ctx context.Context) {
	if r.rng.IntN(7) == 0 {
		r.abort(ctx)
		return
	}
	for attempt := 0; attempt < 4; attempt++ {
		watch := r.watchFence(ctx)
		res := r.pgsprint(ctx, 2*time.Minute, r.finishArgs(500*time.Millisecond)...)
		r.checkFenceWatch(watch.stop(), "finish")
		r.note("dba finish exit %d: %s", res.code, res.lastLine())
		if res.code == 0 {
			r.finished = true
			r.afterFinish(ctx, res)
			return
		}
		msg := res.lastLine()
		low := strings.ToLower(msg)
		switch {
		case strings.Contains(low, "ddl"):
			if !r.hasClass(stopped) && !r.hasClass(either) {
				r.fail("finish stopped on DDL though every statement is replayable (%s): %s", r.firstOf(replayed), msg)
			}
			r.abort(ctx)
			return
		case strings.Contains(low, "differs"):
			switch {
			case r.hasClass(stopped):
				r.fail("DDL that must stop the follow (%s) was replayed and found different only after the fence: %s", r.firstOf(stopped), msg)
			case r.hasClass(either):
				r.fail("DDL (%s) neither replayed exactly nor stopped: %s", r.firstOf(either), msg)
			default:
				r.fail("the target differs after replayable DDL only: %s", msg)
			}
			r.abort(ctx)
			return
		case strings.Contains(low, "prepared"):
			for _, p := range r.prepared {
				r.resolvePrepared(ctx, p)
			}
		case strings.Contains(low, "apply worker fails") && r.conflict == 0 && r.hbaFile == "":
			r.fail("the apply worker fails without an injected fault (not a named stop; DDL: %s): %s", r.firstOf(either)+r.firstOf(stopped), msg)
			r.abort(ctx)
			return
		default:
			r.fixFaults(ctx)
			for _, p := range r.prepared {
				r.resolvePrepared(ctx, p)
			}
		}
	}
	r.fail("finish did not complete in 4 runs: abort instead")
	r.abort(ctx)
}

func (r *round) abort(ctx context.Context) {
	r.fixFaults(ctx)
	res := r.pgsprint(ctx, time.Minute, "follow", "abort", "--source", r.src, "--target", r.dst)
	r.note("abort exit %d: %s", res.code, res.lastLine())
	if res.code != 0 {
		r.fail("follow abort exit %d: %s", res.code, res.lastLine())
		return
	}
	r.aborted, r.finished = true, false
}

// cleanup removes the round's databases, whatever is left in them.
func (r *round) cleanup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if r.load != nil {
		r.load.stop()
	}
	if r.hbaFile != "" {
		os.WriteFile(r.hbaFile, []byte(r.hbaOrig), 0o600)
		r.t.src.Exec(ctx, "postgres", "SELECT pg_reload_conf()")
	}
	sc, err := connect(ctx, r.t.src.ConnString("postgres"))
	if err != nil {
		return err
	}
	defer sc.Close(context.Background())
	// First the prepared transactions: a new table's sync (and so DROP
	// SUBSCRIPTION) waits for them.
	rows, err := sc.Query(ctx, "SELECT gid FROM pg_prepared_xacts")
	if err != nil {
		return err
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, g := range gids {
		if err := r.t.src.Exec(ctx, r.srcDB, "ROLLBACK PREPARED '"+g+"'"); err != nil {
			return err
		}
	}
	dc, err := connect(ctx, r.t.dst.ConnString(r.dstDB))
	if err == nil {
		rows, _ := dc.Query(ctx, "SELECT subname::text FROM pg_subscription")
		subs, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, s := range subs {
			q := `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
			dc.Exec(ctx, "ALTER SUBSCRIPTION "+q+" DISABLE")
			dc.Exec(ctx, "ALTER SUBSCRIPTION "+q+" SET (slot_name = NONE)")
			dc.Exec(ctx, "DROP SUBSCRIPTION "+q)
		}
		dc.Close(ctx)
	}
	for i := 0; ; i++ {
		_, err := sc.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE active_pid IS NOT NULL;
			SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active`)
		if err == nil {
			var left int
			if err = sc.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots").Scan(&left); err == nil && left == 0 {
				break
			}
		}
		if i == 50 {
			return fmt.Errorf("replication slots left on the source: %v", err)
		}
		pause(ctx, 200*time.Millisecond)
	}
	if _, err := sc.Exec(ctx, "DROP DATABASE IF EXISTS "+r.srcDB+" WITH (FORCE)"); err != nil {
		return err
	}
	return r.t.dst.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+r.dstDB+" WITH (FORCE)")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}
