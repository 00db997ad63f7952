package benchkit

import (
	"context"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestSampleClass checks the phases a trace sorts the server's time into,
// from the queries pgsprint, pg_restore, pg_dump and vacuumdb send.
func TestSampleClass(t *testing.T) {
	client := func(state, q string) ActivitySample {
		return ActivitySample{BackendType: "client backend", State: state, Query: q}
	}
	for _, tc := range []struct {
		s    ActivitySample
		want string
	}{
		{client("active", `COPY public.t (a, b) TO STDOUT`), ClassCopyTo},
		{client("active", `COPY (SELECT * FROM ONLY "public"."t" WHERE ctid >= '(0,0)') TO STDOUT (FORMAT binary)`), ClassCopyTo},
		{client("active", `COPY "public"."t" ("a") FROM STDIN`), ClassCopyFrom},
		{client("active", `BEGIN; CREATE INDEX t_a ON public.t USING btree (a); INSERT INTO journal VALUES (1); COMMIT`), ClassIndex},
		{client("active", `BEGIN; SET maintenance_work_mem = '1GB'; CREATE UNIQUE INDEX t_b ON public.t (b); COMMIT`), ClassIndex},
		{client("active", `BEGIN; SET default_tablespace = '';; CREATE INDEX i ON public.t USING btree (a);; INSERT INTO "j"."j" VALUES (1); COMMIT`), ClassIndex},
		{client("active", `ALTER TABLE ONLY public.t ADD CONSTRAINT t_pkey PRIMARY KEY (a);`), ClassConstraint},
		{client("active", `BEGIN; ALTER TABLE ONLY public.t ADD CONSTRAINT t_fk FOREIGN KEY (b) REFERENCES u(b) NOT VALID; COMMIT`), ClassConstraint},
		{client("active", `BEGIN; ALTER TABLE public.t VALIDATE CONSTRAINT t_fk; COMMIT`), ClassValidate},
		{client("active", `ANALYZE public.t;`), ClassAnalyze},
		{client("active", `VACUUM (ANALYZE) public.t`), ClassAnalyze},
		{client("active", `SELECT 1`), ClassOther},
		{client("active", ``), ClassOther},
		{client("idle in transaction", `COPY public.t TO STDOUT`), ClassIdleInTx},
		{ActivitySample{BackendType: "parallel worker", State: "active", Query: `CREATE INDEX i ON t (a)`}, ClassIndex},
		{ActivitySample{BackendType: "autovacuum worker", State: "active", Query: `autovacuum: ANALYZE public.t`}, ClassAutovacuum},
		{ActivitySample{BackendType: "checkpointer", WaitType: "IO", Wait: "DataFileWrite"}, "checkpointer"},
	} {
		if got := tc.s.Class(); got != tc.want {
			t.Errorf("%q (%s): class %q, want %q", tc.s.Query, tc.s.State, got, tc.want)
		}
	}
}

// TestSummarize checks the shares and the busy-backend seconds of two
// rounds of a -j 2 run, worked out by hand.
func TestSummarize(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	copyIn := func(tick int, wt, w string) ActivitySample {
		return ActivitySample{Tick: tick, BackendType: "client backend", State: "active", WaitType: wt, Wait: w, Query: "COPY t FROM STDIN"}
	}
	index := func(tick int) ActivitySample {
		return ActivitySample{Tick: tick, BackendType: "client backend", State: "active", Query: "CREATE INDEX i ON t (a)"}
	}
	// Round 1: ticks at 0, 100, 200, 400 ms (the third answered late):
	// two COPYs, then two, then one index build alone for 200 ms, then
	// nothing for the last 100 ms.
	r1 := Trace{Ticks: []time.Duration{0, ms(100), ms(200), ms(400)}, Samples: []ActivitySample{
		copyIn(0, "", ""), copyIn(0, "LWLock", "WALWrite"),
		copyIn(1, "", ""), copyIn(1, "", ""),
		index(2),
	}}
	// Round 2: two ticks, one index build and a backend idle in its
	// transaction.
	r2 := Trace{Ticks: []time.Duration{0, ms(100)}, Samples: []ActivitySample{
		index(0), {Tick: 0, BackendType: "client backend", State: "idle in transaction", WaitType: "Client", Wait: "ClientRead"},
		index(1),
	}}
	s := Summarize([]Trace{r1, r2}, 2)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	// Backend-time: round 1 0.1+0.1+0.1+0.1+0.2 = 0.6 s, round 2 0.3 s.
	near("backend seconds (mean per round)", s.BackendSeconds, 0.45)
	near("traced seconds (mean per round)", s.Seconds, (0.5+0.2)/2)
	wantWaits := map[string]float64{"CPU": (0.1 + 0.2 + 0.2 + 0.1 + 0.1) / 0.9, "LWLock:WALWrite": 0.1 / 0.9, "Client:ClientRead": 0.1 / 0.9}
	for _, w := range s.Waits {
		near("wait "+w.Key, w.Share, wantWaits[w.Key])
		delete(wantWaits, w.Key)
	}
	if len(wantWaits) != 0 || s.Waits[0].Key != "CPU" {
		t.Errorf("waits %v", s.Waits)
	}
	wantClasses := map[string]float64{ClassCopyFrom: 0.4 / 0.9, ClassIndex: 0.4 / 0.9, ClassIdleInTx: 0.1 / 0.9}
	for _, c := range s.Classes {
		near("class "+c.Key, c.Share, wantClasses[c.Key])
		delete(wantClasses, c.Key)
	}
	if len(wantClasses) != 0 {
		t.Errorf("classes %v, missing %v", s.Classes, wantClasses)
	}
	// Busy: round 1 2,2,1,0 for 0.1,0.1,0.2,0.1 s; round 2 1,1 for 0.1 s
	// each (the idle-in-transaction backend is not busy).
	near("below -j", s.BelowJobs, (0.3+0.2)/2)
	near("at most one", s.AtMostOne, (0.3+0.2)/2)
	near("none", s.NoneBusy, 0.1/2)
	near("mean busy", s.BusyMean, (0.2+0.2+0.2+0.1+0.1)/0.7)
	if len(s.BusySeconds) != 3 {
		t.Fatalf("busy seconds %v", s.BusySeconds)
	}
	near("exactly 2", s.BusySeconds[2], 0.1)
	line := s.String()
	for _, want := range []string{"waits: CPU 78%, Client:ClientRead 11%, LWLock:WALWrite 11%;", "COPY FROM 44%", "mean 1.1 busy of -j2"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %q", line, want)
		}
	}
	if got := Summarize(nil, 2).String(); !strings.Contains(got, "nothing sampled") {
		t.Errorf("empty summary: %q", got)
	}
}

// TestTracer traces a throwaway cluster while one session sleeps inside a
// transaction-less query and another holds a transaction open: the trace
// must show the sleep's wait and the idle transaction, and never the
// tracer's own session.
func TestTracer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	ctx := context.Background()
	c := pgtest.New(t)
	idle, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close(ctx)
	if _, err := idle.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	tr, err := StartTracer(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "postgres", "--\n-- Name: nap\n--\n\n/* a nap */ SELECT pg_sleep(0.6)"); err != nil {
		t.Fatal(err)
	}
	trace, err := tr.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(trace.Ticks) < 3 {
		t.Fatalf("%d ticks in 0.6 s", len(trace.Ticks))
	}
	seen := map[string]bool{}
	for _, s := range trace.Samples {
		seen[s.Waiting()+" / "+s.Class()+" / "+s.Query] = true
		if strings.Contains(s.Query, "pg_stat_activity") || strings.HasPrefix(s.Query, "--") {
			t.Errorf("the tracer saw itself: %+v", s)
		}
	}
	for _, want := range []string{"Timeout:PgSleep / other / SELECT pg_sleep(0.6)", "Client:ClientRead / idle in transaction / BEGIN"} {
		if !seen[want] {
			t.Errorf("trace has no %q: %v", want, seen)
		}
	}
	s := Summarize([]Trace{trace}, 2)
	if s.BusyMean < 0.5 || s.BusyMean > 1.01 {
		t.Errorf("mean busy %.2f while one session slept: %s", s.BusyMean, s)
	}
	path := filepath.Join(t.TempDir(), "trace.csv")
	if err := trace.WriteCSV(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(trace.Samples)+1 || recs[0][6] != "wait" {
		t.Errorf("CSV: %d lines for %d samples, header %v", len(recs), len(trace.Samples), recs[0])
	}
}
