package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// resumeSource is a database that exercises every kind of restore step: a
// table dumped in several ctid chunks, one loaded on several connections
// (split), small tables loaded with COPY FREEZE (orders, 0.6 MB) and
// without (accounts, 34 KB), primary keys, a unique and a plain index,
// foreign keys (checked at once between the two small tables, NOT VALID
// then validated to big), a sequence, a trigger and a comment (the
// rest of post-data), and a materialized view.
const resumeSource = `
CREATE TABLE big (id int PRIMARY KEY, grp int NOT NULL, v text NOT NULL);
INSERT INTO big SELECT i, i % 1000, repeat(md5(i::text), 2) FROM generate_series(1, 120000) i;
CREATE INDEX big_grp ON big (grp);
CREATE TABLE split_me (id int PRIMARY KEY, v text NOT NULL UNIQUE);
INSERT INTO split_me SELECT i, md5(i::text) || repeat('x', 40) FROM generate_series(1, 60000) i;
CREATE TABLE accounts (id serial PRIMARY KEY, name text NOT NULL);
INSERT INTO accounts (name) SELECT 'account ' || i FROM generate_series(1, 2000) i;
CREATE TABLE orders (id bigserial PRIMARY KEY, account_id int NOT NULL REFERENCES accounts, big_id int REFERENCES big, amount numeric NOT NULL);
INSERT INTO orders (account_id, big_id, amount) SELECT 1 + i % 2000, 1 + i % 120000, i / 7.0 FROM generate_series(1, 20000) i;
CREATE INDEX orders_account ON orders (account_id);
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION touch();
COMMENT ON TABLE orders IS 'resume test';
CREATE MATERIALIZED VIEW totals AS SELECT account_id, sum(amount) AS total FROM orders GROUP BY account_id;
ANALYZE;`

// TestResume kills restores with SIGKILL at random points of every phase
// (pre-data, data, indexes, constraints and the rest), resumes them (killing
// some resumes again), and requires the target to equal the source, schema
// and data (pg_dump --schema-only text, every table's row count and
// content hash, sequences), with no journal left. `make test` runs one
// iteration, in the phase the seed picks, `make test-long` twelve (each
// phase three times);
// PGSPRINT_RESUME_ITERATIONS runs more; PGSPRINT_RESUME_SEED replays one
// run, its phases included.
func TestResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", resumeSource); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "src.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("src"), "-f", file, "--chunk-size", "4MB", "-Z", "lz4", "-q")
	other := filepath.Join(dir, "other.pgs") // same data, another snapshot: another archive
	mustPgsprint(t, "dump", "-d", c.ConnString("src"), "-f", other, "--chunk-size", "4MB", "-Z", "lz4", "-q")

	srcData := pgtest.Fingerprint(t, c.ConnString("src"))
	srcSchema := pgtest.SchemaDump(t, c.BinDir(), c.ConnString("src"))
	iterations, rng := pgtest.Seeded(t, "PGSPRINT_RESUME_ITERATIONS", pgtest.Repeat(1, 12))
	phases := []killPoint{
		{"pre-data", "", 300 * time.Millisecond},
		{"data", "pre-data", 800 * time.Millisecond},
		{"indexes", "%index %", 300 * time.Millisecond},
		{"constraints and rest", "validate %", 300 * time.Millisecond},
	}
	restoreArgs := func(dst string) []string {
		return []string{"restore", "-f", file, "-d", c.ConnString(dst), "-j", "3", "--split-min-bytes", "2000000", "-q"}
	}
	first := rng.IntN(len(phases)) // the phase of the first iteration
	for i := range iterations {
		kp := phases[(first+i)%len(phases)]
		dst := fmt.Sprintf("dst%d", i)
		t.Run(fmt.Sprintf("%d %s", i, kp.name), func(t *testing.T) {
			if err := c.CreateDB(ctx, dst); err != nil {
				t.Fatal(err)
			}
			target, err := pgx.Connect(ctx, c.ConnString(dst))
			if err != nil {
				t.Fatal(err)
			}
			defer target.Close(ctx)

			done := !killAt(t, target, kp, rng, restoreArgs(dst)...)
			if done {
				t.Logf("the restore finished before the kill point")
			}
			if !done {
				n := journalSteps(t, target)
				t.Logf("killed in %s with %d steps journaled", kp.name, n)
				if n > 0 { // in whichever phase, so that every run asks
					r := pgsprint(t, nil, restoreArgs(dst)...)
					checkOneError(t, r.code, exitFailure, r.stderr, "--resume")
					args := append(restoreArgs(dst), "--resume")
					args[2] = other
					r = pgsprint(t, nil, args...)
					checkOneError(t, r.code, exitFailure, r.stderr, "another archive")
				}
			}
			if !done && rng.IntN(2) == 0 { // kill the resumed run too, at any point
				kp2 := killPoint{"resume", "", time.Duration(500+rng.IntN(2500)) * time.Millisecond}
				done = !killAt(t, target, kp2, rng, append(restoreArgs(dst), "--resume")...)
				if !done {
					t.Logf("killed the resumed run too, with %d steps journaled", journalSteps(t, target))
				}
			}
			if !done {
				n := journalSteps(t, target) // -1: killed before the journal existed
				args := append(restoreArgs(dst)[:len(restoreArgs(dst))-1], "--resume")
				t0 := time.Now()
				r := mustPgsprint(t, append(args, "-v")...)
				t.Logf("final resume took %s", time.Since(t0))
				requireSkipped(t, r, n, "resuming:")
			}
			requireNoJournal(t, target)
			if diff := compare.SchemaDiff(srcSchema, pgtest.SchemaDump(t, c.BinDir(), c.ConnString(dst))); diff != "" {
				t.Fatalf("schema after resume differs from the source:\n%s", diff)
			}
			if diff := compare.FingerprintDiff(srcData, pgtest.Fingerprint(t, c.ConnString(dst))); len(diff) > 0 {
				t.Fatalf("data after resume differs from the source: %v", diff)
			}
		})
	}
}

// killPoint is when to SIGKILL a restore: once a journal step like after
// is recorded (or once it runs, if after is empty), after a random delay
// of up to jitter.
type killPoint struct {
	name   string
	after  string
	jitter time.Duration
}

// requireSkipped checks that a resumed run (r, run with -v) reports
// skipping at least the journaled steps (n counts the journal's first
// row, which is no step), and logs its lines containing mark.
func requireSkipped(t *testing.T, r result, n int, mark string) {
	t.Helper()
	var resumed int
	if i := strings.Index(r.stderr, "resumed: "); i >= 0 {
		fmt.Sscanf(r.stderr[i:], "resumed: %d steps", &resumed)
	}
	t.Logf("the resumed run skipped %d steps", resumed)
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.Contains(line, mark) {
			t.Log(line)
		}
	}
	if n > 1 && resumed < n-1 {
		t.Errorf("the journal listed %d finished steps, the resumed run skipped %d:\n%s", n-1, resumed, r.stderr)
	}
}

// killAt runs pgsprint with args, SIGKILLs it at kp and reports whether it
// was killed before it ended (false: it ended first, successfully, or
// dropped its finished journal just before the kill reached it).
func killAt(t *testing.T, target *pgx.Conn, kp killPoint, rng *rand.Rand, args ...string) bool {
	t.Helper()
	cmd, stderr := startPgsprint(t, args...)
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.After(2 * time.Minute)
	for kp.after != "" && !journalHas(target, kp.after) {
		select {
		case <-exited:
			return finished(t, cmd, stderr.String())
		case <-deadline:
			t.Fatalf("no journal step like %q within 2 minutes", kp.after)
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-exited:
		return finished(t, cmd, stderr.String())
	case <-time.After(time.Duration(rng.Int64N(int64(kp.jitter) + 1))):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	if kp.after != "" && journalSteps(t, target) < 0 {
		// The journal it wrote is gone: the run ended (a finished
		// restore drops it) in the moment before the kill reached it.
		t.Logf("the restore finished before the kill reached it")
		return false
	}
	return !cmd.ProcessState.Success()
}

func finished(t *testing.T, cmd *exec.Cmd, stderr string) bool {
	t.Helper()
	if !cmd.ProcessState.Success() {
		t.Fatalf("restore failed before it could be killed: %s", stderr)
	}
	return false
}

// journalSteps counts the journal's rows but the mark that the target was
// checked, -1 if there is no journal.
func journalSteps(t *testing.T, target *pgx.Conn) int {
	t.Helper()
	var n int
	if err := target.QueryRow(context.Background(), `SELECT count(*) FROM pgsprint_journal.steps WHERE step <> 'target checked'`).Scan(&n); err != nil {
		return -1
	}
	return n
}
