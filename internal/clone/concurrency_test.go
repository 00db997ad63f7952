package clone

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// concurrencyJobs is the -j of TestConcurrency's runs.
const concurrencyJobs = 2

// gateApp is the application_name of the test's own sessions that hold a
// run in place (a lock pgsprint's children or loaders wait for): the
// sampler does not count them.
const gateApp = "concurrency gate"

// gateKey is the advisory lock the gated column's CHECK takes (shared) for
// every row a target loads: held exclusively by the test, it stops every
// loader at its first row, with its COPY open.
const gateKey = 4242

// concurrencySQL is TestConcurrency's source database: three tables of
// about 8 MiB whose column g is of a domain whose CHECK waits for gateKey
// on the target (COPY TO reads it freely; COPY FROM checks each row);
// gate_p, an empty partitioned table, which pg_dump locks (it locks every
// table it dumps) and pgsprint's leader and readers never do (they read
// relkind r only); and 250 empty tables, so that pre-data is split over -j
// pg_restore runs (restore's defaultPreDataSplitMin is 200 entries).
const concurrencySQL = `
CREATE FUNCTION public.gate_ok(integer) RETURNS boolean LANGUAGE plpgsql
	AS $$BEGIN PERFORM pg_catalog.pg_advisory_xact_lock_shared(4242); RETURN true; END$$;
CREATE DOMAIN public.gated AS integer CHECK (public.gate_ok(VALUE));
CREATE TABLE public.gate_p (id integer) PARTITION BY RANGE (id);
CREATE TABLE public.t1 (id integer PRIMARY KEY, g public.gated NOT NULL, pad text);
CREATE TABLE public.t2 (LIKE public.t1 INCLUDING ALL);
CREATE TABLE public.t3 (LIKE public.t1 INCLUDING ALL);
INSERT INTO public.t1 SELECT i, i, repeat(md5(i::text), 8) FROM generate_series(1, 30000) i;
INSERT INTO public.t2 SELECT * FROM public.t1;
INSERT INTO public.t3 SELECT * FROM public.t1;
CREATE SCHEMA fill;
DO $$ BEGIN FOR i IN 1..250 LOOP EXECUTE format('CREATE TABLE fill.f%s (id integer)', i); END LOOP; END $$;
`

// activity is one session that pg_stat_activity shows in a sample: the
// side of the run its database is (source, target, or "elsewhere:DB"),
// its kind (application_name; "pgsprint" for pgsprint's own connections,
// including clone's "pgsprint clone ..." probe), and what it waits for.
type activity struct {
	pid                int
	side, kind         string
	waitType, waitName string
}

// sample is pg_stat_activity's client sessions at one instant.
type sample []activity

// count is how many sessions of s are on side and of kind ("" for any).
func (s sample) count(side, kind string) int {
	n := 0
	for _, a := range s {
		if a.side == side && (kind == "" || a.kind == kind) {
			n++
		}
	}
	return n
}

// waiting is how many sessions of s on side, of kind, wait for a lock of
// type waitName (pg_stat_activity's wait_event: "relation", "advisory").
func (s sample) waiting(side, kind, waitName string) int {
	n := 0
	for _, a := range s {
		if a.side == side && a.kind == kind && a.waitType == "Lock" && a.waitName == waitName {
			n++
		}
	}
	return n
}

// peaks are the most sessions seen at once, by side and kind, and by side
// alone (kind "total"), over every sample.
type peaks map[string]map[string]int

// add counts sample s into the peaks.
func (p peaks) add(s sample) {
	now := map[[2]string]int{}
	for _, a := range s {
		now[[2]string{a.side, a.kind}]++
		now[[2]string{a.side, "total"}]++
	}
	for k, n := range now {
		if p[k[0]] == nil {
			p[k[0]] = map[string]int{}
		}
		p[k[0]][k[1]] = max(p[k[0]][k[1]], n)
	}
}

// String lists the peaks by side, for the log.
func (p peaks) String() string {
	var lines []string
	for side, kinds := range p {
		var ks []string
		for k, n := range kinds {
			ks = append(ks, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(ks)
		lines = append(lines, side+": "+strings.Join(ks, ", "))
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}

// activitySampler polls pg_stat_activity on one server until stopped,
// keeping the peaks and telling, once, when a sample satisfies held.
type activitySampler struct {
	mu      sync.Mutex
	peaks   peaks
	samples int
	heldAt  sample
	held    chan struct{} // closed at the first sample held accepts
	done    chan struct{}
	wg      sync.WaitGroup
}

// sampleActivity starts polling the server of connString (its database is
// the sampler's own) every few milliseconds; sides maps database names to
// the side they are of the run.
func sampleActivity(t *testing.T, connString string, sides map[string]string, held func(sample) bool) *activitySampler {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, connString+" application_name='"+gateApp+"'")
	if err != nil {
		t.Fatal(err)
	}
	// Client backends only: parallel workers of an index build carry their
	// leader's application_name but are not connections (they count
	// against max_worker_processes, not max_connections).
	const q = `SELECT pid, coalesce(datname, ''),
			CASE WHEN application_name = 'pgsprint' OR application_name LIKE 'pgsprint %' THEN 'pgsprint' ELSE application_name END,
			coalesce(wait_event_type, ''), coalesce(wait_event, '')
		FROM pg_catalog.pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid() AND application_name <> $1`
	s := &activitySampler{peaks: peaks{}, held: make(chan struct{}), done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer conn.Close(ctx)
		prev := map[int]bool{} // the pids of the sample before
		for {
			rows, err := conn.Query(ctx, q, gateApp)
			if err != nil {
				t.Errorf("sample pg_stat_activity: %v", err)
				return
			}
			var now sample
			for rows.Next() {
				var db string
				var a activity
				if err := rows.Scan(&a.pid, &db, &a.kind, &a.waitType, &a.waitName); err != nil {
					t.Errorf("sample pg_stat_activity: %v", err)
				}
				if a.side = sides[db]; a.side == "" {
					a.side = "elsewhere:" + db
				}
				now = append(now, a)
			}
			rows.Close()
			// A session counts toward the peaks once two samples in a
			// row show it: a backend whose client has gone stays in
			// pg_stat_activity for a moment while it exits, and was
			// counted beside the one that replaced it (a run with 4
			// target sessions where 3 were open at once).
			seen := map[int]bool{}
			var lasting sample
			for _, a := range now {
				seen[a.pid] = true
				if prev[a.pid] {
					lasting = append(lasting, a)
				}
			}
			prev = seen
			s.mu.Lock()
			s.peaks.add(lasting)
			s.samples++
			if s.heldAt == nil && held(now) {
				s.heldAt = now
				close(s.held)
			}
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(s.stop)
	return s
}

// stop ends the polling (once; later calls do nothing).
func (s *activitySampler) stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
}

// result returns the peaks and the number of samples so far.
func (s *activitySampler) result() (peaks, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peaks, s.samples
}

// heldSample is the first sample held accepted, counted as peaks.
func (s *activitySampler) heldSample() peaks {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := peaks{}
	p.add(s.heldAt)
	return p
}

// gate holds a lock on one database from a session of the test's own,
// until released.
type gate struct {
	conn    *pgx.Conn
	release string
}

// holdGate takes lock (a statement) on db's connection; release undoes it.
func holdGate(t *testing.T, c *pgtest.Instance, db, lock, release string) *gate {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.ConnString(db)+" application_name='"+gateApp+"'")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, lock); err != nil {
		t.Fatal(err)
	}
	return &gate{conn: conn, release: release}
}

// open releases the gate's lock: the run goes on.
func (g *gate) open(t *testing.T) {
	t.Helper()
	if _, err := g.conn.Exec(context.Background(), g.release); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrency checks the connection counts of docs/CONCURRENCY.md
// against pg_stat_activity, at -j 2, for dump (dump.Run), restore
// (restore.Run) and clone (Run): every sample of the whole run stays
// within the document's bound for each side (source and target
// database), each kind of session (pgsprint, pg_dump, pg_restore, psql;
// any other kind, or any session in another database, has the bound 0)
// and in total; and the run is held by the test, with locks it takes
// before starting it, in the state where the document says the count is
// at its peak, until that state is seen: so the bounds are met, not
// merely not exceeded by a run too quick to sample.
//
//   - dump: its output (a pipe) is not read and gate_p is locked, so the
//     readers block writing the archive and pg_dump waits for its lock:
//     the leader, -j readers and pg_dump are all connected at once.
//   - restore, clone: the target's gated column waits for an advisory
//     lock, so -j loaders are in their COPY at once (and, for clone, -j
//     source readers feeding them, beside the leader).
func TestConcurrency(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	for _, db := range []string{"src", "dst_restore", "dst_clone"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, "src", concurrencySQL); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "src.pgs")
	j := concurrencyJobs

	cases := []struct {
		name string
		// run runs it, writing what `-f -` writes to out.
		run   func(ctx context.Context, out io.Writer) error
		sides map[string]string // database: side
		// bounds are docs/CONCURRENCY.md's most sessions at once, by
		// side and kind ("total": the side's sum).
		bounds map[string]map[string]int
		// gate holds the run in its peak state (and, for dump, so does
		// not reading its output), which held recognizes.
		gate func(t *testing.T) *gate
		held func(sample) bool
		// output is where the run's output goes once the gate is open.
		output string
	}{
		{
			name: "dump",
			run: func(ctx context.Context, out io.Writer) error {
				opts := dumpOptions(t, c.ConnString("src"), "-", j, "none", 0)
				opts.Stdout = out
				_, err := dump.Run(ctx, opts)
				return err
			},
			sides:  map[string]string{"src": "source"},
			bounds: map[string]map[string]int{"source": {"pgsprint": j + 1, "pg_dump": 1, "total": j + 2}},
			gate: func(t *testing.T) *gate {
				return holdGate(t, c, "src", "BEGIN; LOCK TABLE public.gate_p IN ACCESS EXCLUSIVE MODE", "ROLLBACK")
			},
			held: func(s sample) bool {
				return s.count("source", "pgsprint") >= j+1 && s.waiting("source", "pg_dump", "relation") >= 1
			},
			output: archive,
		},
		{
			name: "restore",
			run: func(ctx context.Context, _ io.Writer) error {
				return restoreWith(ctx, t, archive, restoreOptions(t, c.ConnString("dst_restore"), j))
			},
			sides:  map[string]string{"dst_restore": "target"},
			bounds: map[string]map[string]int{"target": {"pgsprint": j, "pg_restore": j, "psql": 1, "total": j + 1}},
			gate: func(t *testing.T) *gate {
				return holdGate(t, c, "dst_restore", fmt.Sprintf("SELECT pg_advisory_lock(%d)", gateKey), fmt.Sprintf("SELECT pg_advisory_unlock(%d)", gateKey))
			},
			held: func(s sample) bool { return s.waiting("target", "pgsprint", "advisory") >= j },
		},
		{
			name: "clone",
			run: func(ctx context.Context, _ io.Writer) error {
				_, err := Run(ctx, cloneOptions(t, c.ConnString("src"), c.ConnString("dst_clone"), j, 0))
				return err
			},
			sides: map[string]string{"src": "source", "dst_clone": "target"},
			bounds: map[string]map[string]int{
				"source": {"pgsprint": j + 1, "pg_dump": 1, "total": j + 1},
				"target": {"pgsprint": j, "pg_restore": j, "psql": 1, "total": j + 1},
			},
			gate: func(t *testing.T) *gate {
				return holdGate(t, c, "dst_clone", fmt.Sprintf("SELECT pg_advisory_lock(%d)", gateKey), fmt.Sprintf("SELECT pg_advisory_unlock(%d)", gateKey))
			},
			held: func(s sample) bool {
				return s.waiting("target", "pgsprint", "advisory") >= j && s.count("source", "pgsprint") >= j+1
			},
		},
	}
	for _, tc := range cases {
		if !t.Run(tc.name, func(t *testing.T) {
			g := tc.gate(t)
			sampler := sampleActivity(t, c.ConnString("postgres"), tc.sides, tc.held)
			// The output is a pipe of the test's: the dump's is read only
			// once the gate is open.
			r, w := io.Pipe()
			defer r.Close()
			rctx, cancel := context.WithCancel(pgtest.Context(t))
			defer cancel()
			ran := make(chan error, 1)
			exited := make(chan struct{})
			go func() {
				err := tc.run(rctx, w)
				w.CloseWithError(err)
				ran <- err
				close(exited)
			}()
			out := io.Discard
			if tc.output != "" {
				f, err := os.Create(tc.output)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				out = f
			}
			copied := make(chan error, 1)
			drain := func() { go func() { _, err := io.Copy(out, r); copied <- err }() }
			if tc.output == "" {
				drain()
			}
			select {
			case <-sampler.held:
			case <-exited:
				p, n := sampler.result()
				t.Fatalf("%s ended (%v) before the state the document describes as its peak was seen (%d samples; most seen at once: %s)",
					tc.name, <-ran, n, p)
			case <-time.After(2 * time.Minute):
				p, n := sampler.result()
				t.Fatalf("the run never reached the state the document describes as its peak within 2 minutes (%d samples; most seen at once: %s)", n, p)
			}
			t.Logf("held at: %s", sampler.heldSample())
			g.open(t)
			if tc.output != "" {
				drain()
			}
			select {
			case <-exited:
			case <-time.After(2 * time.Minute):
				t.Fatalf("%s did not end within 2 minutes of the gate's opening", tc.name)
			}
			if err := <-ran; err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if err := <-copied; err != nil {
				t.Fatalf("read the output: %v", err)
			}
			sampler.stop()
			p, n := sampler.result()
			t.Logf("%d samples; most sessions at once: %s", n, p)
			for side, kinds := range p {
				for kind, most := range kinds {
					if bound := tc.bounds[side][kind]; most > bound {
						t.Errorf("%s: %d %s sessions at once on the %s, docs/CONCURRENCY.md says at most %d", tc.name, most, kind, side, bound)
					}
				}
			}
		}) {
			return
		}
	}
	want := pgtest.Scalar(t, c.ConnString("src"), "SELECT sum(id) FROM (SELECT id FROM public.t1 UNION ALL SELECT id FROM public.t2 UNION ALL SELECT id FROM public.t3) x")
	for _, db := range []string{"dst_restore", "dst_clone"} {
		if got := pgtest.Scalar(t, c.ConnString(db), "SELECT sum(id) FROM (SELECT id FROM public.t1 UNION ALL SELECT id FROM public.t2 UNION ALL SELECT id FROM public.t3) x"); got != want {
			t.Errorf("%s: rows sum to %s, the source's to %s", db, got, want)
		}
	}
}
