package progress

import (
	"math"
	"testing"
	"time"
)

// TestRemaining checks the ETA over the whole run: the data left and the
// non-data work left (indexes, constraints, ANALYZE, weighed in bytes of
// data), at the rate both have moved since the first data byte. Before
// issue 43 a restore whose data was all in showed no ETA while its
// indexes took a third of the run.
func TestRemaining(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    State
		want time.Duration // -1: none shown
	}{
		{"data only, as a dump", State{DataElapsed: 10, Bytes: 100, BytesTotal: 400}, 30 * time.Second},
		{"data half in, indexes to come", State{DataElapsed: 10, Bytes: 100, BytesTotal: 200, StepWork: 100}, 20 * time.Second},
		{"data all in, indexes half built", State{DataElapsed: 30, Bytes: 200, BytesTotal: 200, StepWork: 100, StepWorkDone: 50}, 6 * time.Second},
		{"all done", State{DataElapsed: 30, Bytes: 200, BytesTotal: 200, StepWork: 100, StepWorkDone: 100}, -1},
		{"no data yet", State{DataElapsed: 0, StepWork: 100}, -1},
		{"estimate exceeded, no steps", State{DataElapsed: 1, Bytes: 300, BytesTotal: 100}, -1},
	} {
		got, ok := Remaining(tc.s)
		if !ok {
			got = -1
		}
		if got != tc.want {
			t.Errorf("%s: ETA %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestETAAtHalfTime runs a restore's timeline through a Tracker's
// arithmetic: data loads first, index builds behind it, at a constant
// speed in the plan's own units, and checks that the ETA shown at half
// the run is the real remainder (issue 43 asks for 25%), where the
// data-only ETA said nothing once the data was in.
func TestETAAtHalfTime(t *testing.T) {
	const (
		data  = 600 << 20 // bytes
		steps = 400 << 20 // data-equivalent bytes of index and ANALYZE work
		speed = 10 << 20  // per second, of both
	)
	total := float64(data+steps) / speed // 100 s
	for _, at := range []float64{0.25, 0.5, 0.75} {
		elapsed := total * at
		moved := int64(elapsed * speed)
		s := State{DataElapsed: elapsed, Bytes: min(moved, data), BytesTotal: data, StepWork: steps, StepWorkDone: max(moved-data, 0)}
		eta, ok := Remaining(s)
		if !ok {
			t.Fatalf("at %.0f%%: no ETA shown", 100*at)
		}
		left := total - elapsed
		if e := math.Abs(eta.Seconds()-left) / left; e > 0.01 {
			t.Errorf("at %.0f%%: ETA %v, %.1f s really left (%.0f%% off)", 100*at, eta, left, 100*e)
		}
	}
}

// TestTrackerStepWork checks that finished steps count their work in the
// state, never past the plan's.
func TestTrackerStepWork(t *testing.T) {
	tr := NewTracker("restore")
	tr.Begin(Expected{Op: "restore", Bytes: 100, StepWork: 50})
	tr.Add(100, 1)
	tr.Done(Work{Kind: "indexes", Name: "index a"}, Done{Work: 30})
	if s := tr.State(); s.StepWork != 50 || s.StepWorkDone != 30 {
		t.Errorf("step work %d of %d, want 30 of 50", s.StepWorkDone, s.StepWork)
	}
	tr.Done(Work{Kind: "indexes", Name: "index b"}, Done{Work: 30})
	if s := tr.State(); s.StepWorkDone != 50 {
		t.Errorf("step work done %d, want the plan's 50 at most", s.StepWorkDone)
	}
}

// TestRunningCredit checks what a Tracker counts of the steps under way:
// their worker's share of the run's rate for as long as each has run,
// never more than nine tenths of a step's work, nothing before a rate is
// known.
func TestRunningCredit(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	step := func(ago time.Duration, expect int64) runningStep {
		return runningStep{label: "index", expect: expect, began: now.Add(-ago)}
	}
	for _, tc := range []struct {
		name    string
		rs      []runningStep
		rate    float64
		workers int
		want    int64
	}{
		{"one step alone, 4 s at 10/s", []runningStep{step(4*time.Second, 1000)}, 10, 1, 40},
		{"two steps share the rate", []runningStep{step(4*time.Second, 1000), step(2*time.Second, 1000)}, 10, 2, 20 + 10},
		{"one of two workers", []runningStep{step(4*time.Second, 1000)}, 10, 2, 20},
		{"capped at nine tenths", []runningStep{step(100*time.Second, 1000)}, 10, 1, 900},
		{"no rate yet", []runningStep{step(4*time.Second, 1000)}, 0, 1, 0},
	} {
		if got := runningCredit(tc.rs, now, tc.rate, tc.workers); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestTrackerRunningSteps checks that a step under way counts part of its
// work in the state, that a unit starting beside it does not lower that,
// and that it counts exactly its own work once it ends.
func TestTrackerRunningSteps(t *testing.T) {
	tr := NewTracker("restore")
	tr.Begin(Expected{Op: "restore", Bytes: 100, StepWork: 1 << 40, Workers: 2})
	tr.Add(100, 1)
	w := Work{Kind: "indexes", Name: "index a", Expect: 1 << 30}
	tr.Start(w)
	time.Sleep(50 * time.Millisecond)
	before := tr.State().StepWorkDone
	if before <= 0 || before > (1<<30)*9/10 {
		t.Errorf("running step: work done %d, want some of its %d", before, int64(1<<30))
	}
	// A unit starting beside it takes nothing back.
	load := Work{Kind: "data", Table: "t", Name: "load t"}
	tr.Start(load)
	if s := tr.State(); s.StepWorkDone < before {
		t.Errorf("a load started beside the step: work done %d, was %d", s.StepWorkDone, before)
	}
	tr.Done(load, Done{})
	tr.Done(w, Done{Work: 1 << 30})
	if s := tr.State(); s.StepWorkDone != 1<<30 {
		t.Errorf("ended step: work done %d, want %d", s.StepWorkDone, int64(1<<30))
	}
}
