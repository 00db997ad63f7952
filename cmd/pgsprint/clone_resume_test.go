package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestCloneResume kills clones run in a snapshot held by `pgsprint
// snapshot` with SIGKILL during the data and during the index builds,
// finishes each with --resume, and requires the target to equal the source
// as of the held snapshot (schema, and every table's rows hashed inside that
// snapshot), while the source takes writes all along: transfers between
// bank accounts and updates of the chunked table, so that a clone resumed
// in a fresh snapshot, or with a fresh plan, would visibly differ.
//
// Every run, the first one included, passes --resume: on a target with no
// journal it is an ordinary clone, so a script can always pass it. `make
// test` runs one iteration, at a kill point the seed picks, `make
// test-long` six (each kill point three times);
// PGSPRINT_CLONE_RESUME_ITERATIONS runs more and PGSPRINT_RESUME_SEED
// replays one run, its kill points included.
func TestCloneResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", resumeSource+pgtest.BankSQL); err != nil {
		t.Fatal(err)
	}
	src := c.ConnString("src")
	bank := pgtest.StartTransfers(t, src, 2)
	defer bank.Stop()
	stopUpdates := updateRows(t, src)
	defer stopUpdates()
	time.Sleep(200 * time.Millisecond) // some transfers before the snapshot

	holder, id := startSnapshot(t, src)
	t.Logf("holding snapshot %s", id)
	srcCfg, err := pgx.ParseConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	asOf, err := compare.FingerprintSnapshot(ctx, srcCfg, 2, id)
	if err != nil {
		t.Fatal(err)
	}
	dropSequences(asOf) // not transactional: read at planning time, not in the snapshot
	srcSchema := pgtest.SchemaDump(t, c.BinDir(), src)

	iterations, rng := pgtest.Seeded(t, "PGSPRINT_CLONE_RESUME_ITERATIONS", pgtest.Repeat(1, 6))
	points := []killPoint{
		{"data", "pre-data", 700 * time.Millisecond},
		{"indexes", "%index %", 300 * time.Millisecond},
	}
	first := rng.IntN(len(points)) // the kill point of the first iteration
	for i := range iterations {
		kp := points[(first+i)%len(points)]
		dst := fmt.Sprintf("copy%d", i)
		cloneArgs := func(snapshot string, resume bool) []string {
			a := []string{"clone", "--source", src, "--target", c.ConnString(dst), "--snapshot", snapshot, "-j", "2", "--chunk-size", "2MB"}
			if resume {
				a = append(a, "--resume")
			}
			return a
		}
		args := cloneArgs(id, true)
		t.Run(fmt.Sprintf("%d %s", i, kp.name), func(t *testing.T) {
			if err := c.CreateDB(ctx, dst); err != nil {
				t.Fatal(err)
			}
			target, err := pgx.Connect(ctx, c.ConnString(dst))
			if err != nil {
				t.Fatal(err)
			}
			defer target.Close(ctx)
			killed := killAt(t, target, kp, rng, append(args, "-q")...)
			if !killed {
				t.Logf("the clone finished before the kill point")
			} else {
				n := journalSteps(t, target)
				t.Logf("killed in %s with %d steps journaled", kp.name, n)
				if n > 0 { // at either kill point, so that every run asks
					r := pgsprint(t, nil, append(cloneArgs(id, false), "-q")...)
					checkOneError(t, r.code, exitFailure, r.stderr, "--resume")
					// Another snapshot is refused before it is imported.
					r = pgsprint(t, nil, append(cloneArgs("00000009-0000FFFF-1", true), "-q")...)
					checkOneError(t, r.code, exitFailure, r.stderr, "holds an unfinished clone of snapshot "+id)
				}
				r := mustPgsprint(t, append(args, "-v")...)
				requireSkipped(t, r, n, "resuming")
			}
			requireNoJournal(t, target)
			if diff := compare.SchemaDiff(srcSchema, pgtest.SchemaDump(t, c.BinDir(), c.ConnString(dst))); diff != "" {
				t.Fatalf("schema after resume differs from the source:\n%s", diff)
			}
			got := pgtest.Fingerprint(t, c.ConnString(dst))
			dropSequences(got)
			if diff := compare.FingerprintDiff(asOf, got); len(diff) > 0 {
				t.Fatalf("data after resume differs from the source as of snapshot %s: %v", id, diff)
			}
			pgtest.CheckBank(t, c.ConnString(dst), "resumed clone")
		})
	}

	// The writes went on: a clone in a fresh snapshot would differ.
	now := pgtest.Fingerprint(t, src)
	dropSequences(now)
	if diff := compare.FingerprintDiff(asOf, now); len(diff) == 0 {
		t.Error("the source did not change after the snapshot: the test proves nothing")
	} else {
		t.Logf("the source changed since the snapshot: %d tables differ", len(diff))
	}

	t.Run("resume without snapshot", func(t *testing.T) {
		r := pgsprint(t, nil, "clone", "--source", src, "--target", c.ConnString("copy0"), "--resume")
		checkOneError(t, r.code, exitUsage, r.stderr, "--resume needs --snapshot")
	})

	t.Run("snapshot holder ended", func(t *testing.T) {
		holder.stop(t)
		if err := c.CreateDB(ctx, "orphan"); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "clone", "--source", src, "--target", c.ConnString("orphan"), "--snapshot", id, "--resume", "-q")
		checkOneError(t, r.code, exitFailure, r.stderr, "snapshot "+id+" no longer exists: the `pgsprint snapshot` process holding it has ended")
	})

	t.Run("snapshot holder signals", func(t *testing.T) {
		// SIGTERM (stdin /dev/null, as a script's background job's): exit 0.
		cmd := exec.Command(binary, "snapshot", "-d", src, "-q")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the id however loaded the machine is, then give
		// /dev/null's EOF time to end it: it must not.
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("the holder printed %q and no id: %v", line, err)
		}
		time.Sleep(300 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("the holder printed %q and did not keep holding: %v", line, err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := waitExit(t, cmd); code != 0 {
			t.Errorf("pgsprint snapshot exited %d on SIGTERM", code)
		}
		// Its session terminated: the snapshot is gone, exit 1 saying so.
		h, gone := startSnapshot(t, src, "-q")
		admin, err := pgx.Connect(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = 'pgsprint snapshot' ORDER BY backend_start DESC LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		code := waitExit(t, h.cmd)
		h.once.Do(func() {})
		checkOneError(t, code, exitFailure, h.stderr.String(), "snapshot "+gone+" is gone")
	})
}

// snapshotHolder is a running `pgsprint snapshot`, its standard input a
// pipe whose end stops it, as a coprocess's would.
type snapshotHolder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *strings.Builder
	once   sync.Once
}

// startSnapshot starts `pgsprint snapshot` on connString and returns it
// with the snapshot id it printed. It is stopped when the test ends.
func startSnapshot(t *testing.T, connString string, args ...string) (*snapshotHolder, string) {
	t.Helper()
	h := &snapshotHolder{cmd: exec.Command(binary, append([]string{"snapshot", "-d", connString}, args...)...), stderr: &strings.Builder{}}
	h.cmd.Stderr = h.stderr
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.stop(t) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("pgsprint snapshot printed no id: %v\n%s", err, h.stderr)
	}
	return h, strings.TrimSpace(line)
}

// stop closes the holder's standard input and requires it to exit 0.
func (h *snapshotHolder) stop(t *testing.T) {
	t.Helper()
	h.once.Do(func() {
		h.stdin.Close()
		if code := waitExit(t, h.cmd); code != 0 {
			t.Errorf("pgsprint snapshot exited %d on EOF of its input:\n%s", code, h.stderr)
		}
	})
}

// updateRows rewrites random rows of the chunked table "big" until the
// returned function is called, so that its chunks differ between instants.
func updateRows(t *testing.T, connString string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgx.Connect(ctx, connString)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		for n := 0; ctx.Err() == nil; n++ {
			_, err := conn.Exec(ctx, "UPDATE big SET v = md5(random()::text) WHERE id = $1", 1+(n*7919)%120000)
			if err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond) // as startTransfers: enough writes, not a core

		}
	}()
	return func() { cancel(); wg.Wait() }
}

// dropSequences removes sequences from a fingerprint.
func dropSequences(fp map[string]string) {
	for k, v := range fp {
		if strings.HasPrefix(v, "last_value=") {
			delete(fp, k)
		}
	}
}
