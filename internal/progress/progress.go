// Package progress tells people what a dump or restore is doing while it
// runs: live bars on a terminal, a line every few seconds in a log, or one
// JSON event per line for scripts. The pipelines report through the small
// Reporter interface, so they never depend on terminal code.
package progress

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Reporter is what the dump and restore pipelines call as they work. Every
// method may be called from many goroutines at once and must return
// quickly: workers call Add for every few hundred KiB they move.
type Reporter interface {
	// Begin announces the planned work.
	Begin(p Expected)
	// Phase says a named step of the run has started (e.g. "pre-data").
	Phase(name string)
	// Steps adds n expected non-data tasks (index and constraint builds)
	// once the pipeline knows them.
	Steps(n int)
	// Start says a worker began one unit of work.
	Start(w Work)
	// Add counts bytes and rows moved by a unit in flight.
	Add(bytes, rows int64)
	// Done says a unit of work finished, with its totals.
	Done(w Work, d Done)
}

// Expected is the work a run expects. Bytes and Rows are estimates for a dump
// (taken from the catalog) and exact for a restore (from the archive).
type Expected struct {
	Op     string `json:"op"` // "dump" or "restore"
	Tables int    `json:"tables"`
	Chunks int    `json:"chunks"`
	Bytes  int64  `json:"bytes_total"`
	Rows   int64  `json:"rows_total"`
	// Estimated says Bytes is an estimate (a dump's, from relation
	// sizes): as each unit finishes, its Done.Planned share of it is
	// replaced by the bytes it moved, so that the total converges on the
	// real one and equals it when every chunk is done. A small table's
	// relation size (a page, 8 KiB) is many times its COPY text.
	Estimated bool `json:"estimated,omitempty"`
	// StepWork is the work of the non-data tasks (index builds,
	// constraints, foreign keys, ANALYZE) in bytes of data it takes as
	// long as to load: a restore's ETA covers them too, where it covered
	// the data alone and showed nothing while indexes took a third of
	// the run. Each Done.Work counts against it.
	StepWork int64 `json:"step_work,omitempty"`
	// Workers is how many units run at once at most (the connections):
	// a running step's share of the run's rate (runningCredit). Zero: the
	// most units seen in flight at once.
	Workers int `json:"workers,omitempty"`
}

// Work names one unit of work: a table chunk (Kind "data"), a large
// object, or a restore step such as "index" or "constraint".
type Work struct {
	Kind  string `json:"kind"`
	Table string `json:"table,omitempty"` // quoted schema.name, for data
	Name  string `json:"name"`            // for messages
	// Whole says the unit moves all of its table (one chunk, not split):
	// no other unit of the table will come, so a Tracker can rank the
	// table as soon as it is done instead of keeping its sum to the end.
	Whole bool `json:"-"`
	// Expect is a non-data unit's share of Expected.StepWork, known when
	// it starts: while it runs, a Tracker counts part of it as done, so
	// that a 10-second index build does not freeze the work done (and
	// push the ETA up) until it ends.
	Expect int64 `json:"-"`
}

// Done is what a finished unit of work moved and how long it took.
type Done struct {
	Bytes   int64
	Rows    int64
	Elapsed time.Duration
	// Planned is the unit's share of Expected.Bytes when that is an estimate
	// (Expected.Estimated).
	Planned int64
	// Work is a non-data unit's share of Expected.StepWork.
	Work int64
}

// Nop is the Reporter used when nobody is watching.
type Nop struct{}

// Begin implements Reporter.
func (Nop) Begin(Expected) {}

// Phase implements Reporter.
func (Nop) Phase(string) {}

// Steps implements Reporter.
func (Nop) Steps(int) {}

// Start implements Reporter.
func (Nop) Start(Work) {}

// Add implements Reporter.
func (Nop) Add(int64, int64) {}

// Done implements Reporter.
func (Nop) Done(Work, Done) {}

// Tracker is a Reporter that keeps the run's state for a renderer to poll
// and for the end-of-run summary. Workers only touch atomics and, at the
// start and end of each unit, one mutex.
type Tracker struct {
	begin time.Time
	bytes atomic.Int64
	rows  atomic.Int64
	// firstData is when the first data bytes arrived, in nanoseconds
	// since begin (0 before): the rate and the ETA are taken from then,
	// not from a start that a long catalog read or pre-data preceded.
	firstData atomic.Int64

	mu        sync.Mutex
	plan      Expected
	phase     string
	phases    []PhaseTime
	steps     int
	stepsDone int
	stepWork  int64 // Done.Work of the finished non-data units
	chunks    int
	// replanned is what finished units moved minus what the plan
	// expected of them (Expected.Estimated).
	replanned int64
	inFlight  map[string]int // table or step name → units running
	running   []runningStep  // the non-data units under way that expect work
	units     int            // units in flight now
	peak      int            // the most units in flight at once so far (Expected.Workers)
	// tables sums the units of the tables that may have more to come
	// (not Work.Whole); largest holds the largestN largest of the others,
	// all of them the summary can name. A run of 100,000 small tables
	// kept an entry for each, 7.5 MB by the end of its data phase.
	tables  map[string]*TableTime
	largest []TableTime // in summary order (largerFirst)
	events  func(Event) // called under mu for every event, for JSON output
}

// NewTracker starts the clock of a run of op ("dump", "restore").
func NewTracker(op string) *Tracker {
	return &Tracker{begin: time.Now(), plan: Expected{Op: op}, inFlight: map[string]int{}, tables: map[string]*TableTime{}}
}

// Event is one thing that happened, as --progress=json prints it.
type Event struct {
	Event    string    `json:"event"` // start, phase, table, step, progress, summary, error
	Time     time.Time `json:"time"`
	Elapsed  float64   `json:"elapsed_s"`
	Expected *Expected `json:"plan,omitempty"`
	Phase    string    `json:"phase,omitempty"`
	Work     *Work     `json:"work,omitempty"`
	Bytes    int64     `json:"bytes,omitempty"`
	Rows     int64     `json:"rows,omitempty"`
	Seconds  float64   `json:"seconds,omitempty"`
	State    *State    `json:"state,omitempty"`
	Summary  *Summary  `json:"summary,omitempty"`
	// Error is the one-line message of the failure that ended the run,
	// and ExitCode pgsprint's exit code (the "error" event, always last).
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
}

// WriteError writes the "error" event that ends a failed run's JSON
// output: scripts reading the events see the failure among them, not as
// a line of text they cannot parse. start is when the run began.
func WriteError(w io.Writer, start time.Time, msg string, code int) {
	now := time.Now()
	_ = json.NewEncoder(w).Encode(Event{Event: "error", Time: now, Elapsed: now.Sub(start).Seconds(), Error: msg, ExitCode: code})
}

func (t *Tracker) emit(e Event) {
	if t.events == nil {
		return
	}
	e.Time = time.Now()
	e.Elapsed = time.Since(t.begin).Seconds()
	t.events(e)
}

// Begin implements Reporter.
func (t *Tracker) Begin(p Expected) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.plan = p
	t.emit(Event{Event: "start", Expected: &p})
}

// Phase implements Reporter.
func (t *Tracker) Phase(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Since(t.begin)
	if n := len(t.phases); n > 0 && t.phases[n-1].Elapsed == 0 {
		t.phases[n-1].Elapsed = now - t.phases[n-1].Start
	}
	t.phase = name
	t.phases = append(t.phases, PhaseTime{Name: name, Start: now})
	t.emit(Event{Event: "phase", Phase: name})
}

// Steps implements Reporter.
func (t *Tracker) Steps(n int) {
	t.mu.Lock()
	t.steps += n
	t.mu.Unlock()
}

// Start implements Reporter.
func (t *Tracker) Start(w Work) {
	t.mu.Lock()
	t.inFlight[w.label()]++
	t.units++
	t.peak = max(t.peak, t.units)
	if w.Kind != "data" && w.Expect > 0 {
		t.running = append(t.running, runningStep{label: w.label(), expect: w.Expect, began: time.Now()})
	}
	t.mu.Unlock()
}

// Add implements Reporter.
func (t *Tracker) Add(bytes, rows int64) {
	if bytes > 0 && t.firstData.Load() == 0 {
		t.firstData.CompareAndSwap(0, max(int64(time.Since(t.begin)), 1))
	}
	t.bytes.Add(bytes)
	t.rows.Add(rows)
}

// Done implements Reporter.
func (t *Tracker) Done(w Work, d Done) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := w.label()
	if t.inFlight[l]--; t.inFlight[l] <= 0 {
		delete(t.inFlight, l)
	}
	t.units--
	if w.Kind != "data" {
		t.stepsDone++
		t.stepWork += d.Work
		t.running = endStep(t.running, l)
		t.emit(Event{Event: "step", Work: &w, Seconds: d.Elapsed.Seconds()})
		return
	}
	t.chunks++
	if t.plan.Estimated {
		t.replanned += d.Bytes - d.Planned
	}
	tt := t.tables[w.Table]
	switch {
	case tt == nil && w.Whole:
		t.largest = keepLargest(t.largest, TableTime{Table: w.Table, Bytes: d.Bytes, Rows: d.Rows, Seconds: d.Elapsed.Seconds()})
	case tt == nil:
		tt = &TableTime{Table: w.Table}
		t.tables[w.Table] = tt
		fallthrough
	default:
		tt.Bytes += d.Bytes
		tt.Rows += d.Rows
		tt.Seconds += d.Elapsed.Seconds()
	}
	t.emit(Event{Event: "table", Work: &w, Bytes: d.Bytes, Rows: d.Rows, Seconds: d.Elapsed.Seconds()})
}

func (w Work) label() string {
	if w.Kind == "data" && w.Table != "" {
		return w.Table
	}
	return w.Name
}

// State is a snapshot of a run in progress.
type State struct {
	Op      string  `json:"op"`
	Phase   string  `json:"phase"`
	Elapsed float64 `json:"elapsed_s"`
	// DataElapsed is the time since the first data bytes arrived (0
	// before): what the rate and the ETA are measured over.
	DataElapsed float64  `json:"data_elapsed_s,omitempty"`
	Bytes       int64    `json:"bytes"`
	BytesTotal  int64    `json:"bytes_total"`
	Rows        int64    `json:"rows"`
	RowsTotal   int64    `json:"rows_total"`
	Chunks      int      `json:"chunks_done"`
	ChunksAll   int      `json:"chunks_total"`
	Steps       int      `json:"steps_done"`
	StepsAll    int      `json:"steps_total"`
	InFlight    []string `json:"in_flight"`
	// StepWork and StepWorkDone are the plan's non-data work and what of
	// it is done, in data-equivalent bytes (Expected.StepWork): with the
	// bytes they make the whole run's work, which the ETA covers.
	// StepWorkDone counts the finished units and part of those running
	// (runningCredit).
	StepWork     int64 `json:"step_work,omitempty"`
	StepWorkDone int64 `json:"step_work_done,omitempty"`
}

// State returns the run's state now.
func (t *Tracker) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state()
}

func (t *Tracker) state() State {
	elapsed := time.Since(t.begin)
	s := State{Op: t.plan.Op, Phase: t.phase, Elapsed: elapsed.Seconds(),
		Bytes: t.bytes.Load(), BytesTotal: t.plan.Bytes, Rows: t.rows.Load(), RowsTotal: t.plan.Rows,
		Chunks: t.chunks, ChunksAll: t.plan.Chunks, Steps: t.stepsDone, StepsAll: t.steps,
		StepWork: t.plan.StepWork, StepWorkDone: min(t.stepWork, t.plan.StepWork), InFlight: []string{}}
	if first := t.firstData.Load(); first > 0 {
		s.DataElapsed = (elapsed - time.Duration(first)).Seconds()
	}
	if s.DataElapsed > 0 && len(t.running) > 0 {
		rate := float64(s.Bytes+t.stepWork) / s.DataElapsed
		workers := t.plan.Workers
		if workers <= 0 {
			workers = t.peak
		}
		s.StepWorkDone = min(t.stepWork+runningCredit(t.running, time.Now(), rate, workers), t.plan.StepWork)
	}
	if t.plan.Estimated {
		if t.plan.Bytes > 0 {
			s.BytesTotal = max(t.plan.Bytes+t.replanned, s.Bytes)
		}
		if s.ChunksAll > 0 && s.Chunks >= s.ChunksAll {
			// Every chunk is done: what was moved is the total,
			// whatever the estimates said.
			s.BytesTotal, s.RowsTotal = s.Bytes, s.Rows
		}
	}
	for name := range t.inFlight {
		s.InFlight = append(s.InFlight, name)
	}
	sort.Strings(s.InFlight)
	return s
}

// Tick emits a progress event with the current state (for JSON output).
func (t *Tracker) Tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state()
	t.emit(Event{Event: "progress", State: &s})
}

// runningStep is a non-data unit under way (Work.Expect): what a Tracker
// counts of it before it ends.
type runningStep struct {
	label  string
	expect int64
	began  time.Time
}

// runningCredit is the share of the running steps' work counted as done
// at now: each has moved, since it began, its worker's share of the run's
// rate (the work finished per second, split evenly over workers, the most
// units ever in flight at once, so that a unit starting beside it takes
// nothing back), and at most nine tenths of its work, the rest left for
// when it ends. A
// TPC-H restore's ETA climbed from +19% to +106% of the time really left
// while lineitem's index builds ran, 5 to 10 s each, with the work done
// standing still.
func runningCredit(rs []runningStep, now time.Time, rate float64, workers int) int64 {
	if rate <= 0 {
		return 0
	}
	share := rate / float64(max(workers, len(rs)))
	var credit int64
	for _, r := range rs {
		credit += min(int64(share*now.Sub(r.began).Seconds()), r.expect*9/10)
	}
	return credit
}

// endStep removes the first running step of label, the one ending.
func endStep(rs []runningStep, label string) []runningStep {
	for i, r := range rs {
		if r.label == label {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}
