package benchkit

import (
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// TraceInterval is how often a Tracer reads pg_stat_activity: often
// enough that a 10 s index build or a 1 s tail shows, rarely enough that
// the one query costs the measured run about 1% of one core.
const TraceInterval = 100 * time.Millisecond

// ActivitySample is one server process seen at one tick of a Tracer: what it was
// doing and on what it waited.
type ActivitySample struct {
	Tick        int           // the tick (Trace.Ticks) it was seen at
	At          time.Duration // since the tracer started
	PID         int
	BackendType string // client backend, parallel worker, autovacuum worker, checkpointer, ...
	App         string // application_name: pgsprint, pg_restore, vacuumdb, ...
	State       string // active, idle in transaction, "" for background processes
	WaitType    string // wait_event_type, "" when on CPU
	Wait        string // wait_event
	Query       string // the query's first characters, leading comments left out, on one line
}

// Waiting is the sample's wait as type:event, or "CPU" when it waited on
// nothing that PostgreSQL instruments (running, or in an uninstrumented
// wait).
func (s ActivitySample) Waiting() string {
	if s.WaitType == "" {
		return "CPU"
	}
	return s.WaitType + ":" + s.Wait
}

// Busy says whether the process was working for a client at that tick:
// an active backend, parallel worker or autovacuum worker, not one idle in
// a transaction nor a background process.
func (s ActivitySample) Busy() bool { return s.State == "active" }

// Activity classes Class sorts samples into: the phases of a dump and a
// restore whose share of the backends' time the trace reports.
const (
	ClassCopyTo     = "COPY TO"
	ClassCopyFrom   = "COPY FROM"
	ClassIndex      = "CREATE INDEX"
	ClassConstraint = "ADD CONSTRAINT"
	ClassValidate   = "VALIDATE"
	ClassAnalyze    = "ANALYZE"
	ClassAutovacuum = "autovacuum"
	ClassIdleInTx   = "idle in transaction"
	ClassOther      = "other"
)

// leading are the statements a tool sends before the one that does the
// work (pgsprint wraps each task in BEGIN; ...; COMMIT in one query).
var leading = regexp.MustCompile(`(?is)^[\s;]*(?:(?:BEGIN|START TRANSACTION|SET\s[^;]*|SELECT\s+pg_catalog\.set_config\([^;]*)\s*;[\s;]*)*`)

// comments are the comments before a query's first statement (psql sends
// pg_dump's "-- Name: ..." headers with the statement after them).
var comments = regexp.MustCompile(`^(?s)(?:\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/))*\s*`)

var classes = []struct {
	re    *regexp.Regexp
	class string
}{
	{regexp.MustCompile(`(?is)^COPY\s.*\sTO\s+STDOUT`), ClassCopyTo},
	{regexp.MustCompile(`(?is)^COPY\s.*\sFROM\s+STDIN`), ClassCopyFrom},
	{regexp.MustCompile(`(?is)^CREATE\s+(UNIQUE\s+)?INDEX`), ClassIndex},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s.*\sVALIDATE\s+CONSTRAINT`), ClassValidate},
	{regexp.MustCompile(`(?is)^ALTER\s+TABLE\s.*\sADD\s+(CONSTRAINT|PRIMARY\s+KEY|UNIQUE|FOREIGN\s+KEY)`), ClassConstraint},
	{regexp.MustCompile(`(?is)^(ANALYZE|VACUUM\s.*ANALYZE)`), ClassAnalyze},
}

// Class is the sample's activity: which phase of a dump or restore its
// query belongs to, from the first statement after any BEGIN and SET, or
// idle in transaction, autovacuum, or the background process's type.
func (s ActivitySample) Class() string {
	switch {
	case s.BackendType == "autovacuum worker":
		return ClassAutovacuum
	case s.State == "idle in transaction" || s.State == "idle in transaction (aborted)":
		return ClassIdleInTx
	case s.BackendType != "client backend" && s.BackendType != "parallel worker":
		return s.BackendType
	}
	q := s.Query[len(leading.FindString(s.Query)):]
	for _, c := range classes {
		if c.re.MatchString(q) {
			return c.class
		}
	}
	return ClassOther
}

// Trace is what a Tracer saw: when each tick was taken and every sample.
type Trace struct {
	Ticks   []time.Duration // since the tracer started
	Samples []ActivitySample
}

// Tracer samples pg_stat_activity on its own connection every
// TraceInterval while a measured command runs: the wait events and
// phases behind the command's wall time, which the machine's CPU alone
// cannot tell apart.
type Tracer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	trace  Trace
	err    error
}

// traceQuery reads every server process but the tracer's own, idle client
// backends and background processes idle in their main loop.
const traceQuery = `SELECT pid, coalesce(backend_type, ''), coalesce(application_name, ''), coalesce(state, ''),
	coalesce(wait_event_type, ''), coalesce(wait_event, ''), left(coalesce(query, ''), 600)
FROM pg_catalog.pg_stat_activity
WHERE pid <> pg_catalog.pg_backend_pid() AND state IS DISTINCT FROM 'idle'
	AND (state IS NOT NULL OR coalesce(wait_event_type, '') <> 'Activity')`

// StartTracer connects to conn and samples until Stop.
func StartTracer(ctx context.Context, conn string) (*Tracer, error) {
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &Tracer{cancel: cancel, done: make(chan struct{})}
	go t.loop(ctx, c)
	return t, nil
}

func (t *Tracer) loop(ctx context.Context, c *pgx.Conn) {
	defer close(t.done)
	defer c.Close(context.WithoutCancel(ctx))
	start := time.Now()
	tk := time.NewTicker(TraceInterval)
	defer tk.Stop()
	for {
		at := time.Since(start)
		samples, err := sampleOnce(ctx, c)
		t.mu.Lock()
		if err != nil {
			if ctx.Err() == nil && t.err == nil {
				t.err = fmt.Errorf("trace: %w", err)
			}
			t.mu.Unlock()
			return
		}
		tick := len(t.trace.Ticks)
		t.trace.Ticks = append(t.trace.Ticks, at)
		for _, s := range samples {
			s.Tick, s.At = tick, at
			t.trace.Samples = append(t.trace.Samples, s)
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

func sampleOnce(ctx context.Context, c *pgx.Conn) ([]ActivitySample, error) {
	rows, err := c.Query(ctx, traceQuery)
	if err != nil {
		return nil, err
	}
	var out []ActivitySample
	for rows.Next() {
		var s ActivitySample
		var pid int32
		if err := rows.Scan(&pid, &s.BackendType, &s.App, &s.State, &s.WaitType, &s.Wait, &s.Query); err != nil {
			rows.Close()
			return nil, err
		}
		s.PID = int(pid)
		s.Query = strings.Join(strings.Fields(s.Query[len(comments.FindString(s.Query)):]), " ")
		out = append(out, s)
	}
	return out, rows.Err()
}

// Stop ends the sampling and returns what it saw, or the error that
// stopped it early (the trace up to then comes with it).
func (t *Tracer) Stop() (Trace, error) {
	t.cancel()
	<-t.done
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trace, t.err
}

// WriteCSV writes the trace's samples to path, one line per process and
// tick, for reading a run's phases after it.
func (tr Trace) WriteCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"tick", "at_s", "pid", "backend_type", "application_name", "state", "wait", "class", "query"})
	for _, s := range tr.Samples {
		w.Write([]string{strconv.Itoa(s.Tick), strconv.FormatFloat(s.At.Seconds(), 'f', 2, 64), strconv.Itoa(s.PID),
			s.BackendType, s.App, s.State, s.Waiting(), s.Class(), s.Query})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("trace %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("trace %s: %w", path, err)
	}
	return nil
}
