package benchkit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Share is one key's part of the sampled backend-time, 0 to 1.
type Share struct {
	Key   string  `json:"key"`
	Share float64 `json:"share"`
}

// TraceSummary is what one or more traces of the same command (its
// rounds) say about where its time went: which waits and which phases
// took the server processes' time, and how long too few backends were
// busy to use the -j connections (the one-core tail of a last index
// build or VALIDATE).
type TraceSummary struct {
	Rounds int `json:"rounds"`
	Jobs   int `json:"jobs"`
	// Seconds is the traced wall time, a mean over the rounds; so are
	// the other seconds.
	Seconds float64 `json:"seconds"`
	// BackendSeconds is the sampled backend-time: each process seen,
	// for as long as until the next tick.
	BackendSeconds float64 `json:"backend_seconds"`
	Waits          []Share `json:"waits"`   // by ActivitySample.Waiting, largest first
	Classes        []Share `json:"classes"` // by ActivitySample.Class, largest first
	// BusyMean is the mean number of busy backends (ActivitySample.Busy).
	BusyMean float64 `json:"busy_mean"`
	// BelowJobs, AtMostOne and NoneBusy are the seconds during which
	// fewer than Jobs, at most one, and no backend was busy.
	BelowJobs float64 `json:"below_jobs_s"`
	AtMostOne float64 `json:"at_most_one_s"`
	NoneBusy  float64 `json:"none_busy_s"`
	// BusySeconds[n] is the seconds during which exactly n backends
	// were busy.
	BusySeconds []float64 `json:"busy_seconds"`
}

// Summarize sums up the traces of one command's rounds run at -j jobs.
func Summarize(traces []Trace, jobs int) TraceSummary {
	t := NewTraceTotals(jobs)
	for _, tr := range traces {
		t.Add(tr)
	}
	return t.Summary()
}

// TraceTotals adds up the traces of one command's rounds as they come,
// so that a long run need not keep every sample of every round.
type TraceTotals struct {
	s              TraceSummary // the sums, before the means
	waits, classes map[string]float64
}

// NewTraceTotals starts the totals of a command run at -j jobs.
func NewTraceTotals(jobs int) *TraceTotals {
	return &TraceTotals{s: TraceSummary{Jobs: jobs}, waits: map[string]float64{}, classes: map[string]float64{}}
}

// Add counts one round's trace in.
func (t *TraceTotals) Add(tr Trace) {
	s := &t.s
	s.Rounds++
	weights := tickWeights(tr.Ticks)
	busy := make([]int, len(tr.Ticks))
	for _, sm := range tr.Samples {
		if sm.Tick < 0 || sm.Tick >= len(weights) {
			continue
		}
		w := weights[sm.Tick]
		s.BackendSeconds += w
		t.waits[sm.Waiting()] += w
		t.classes[sm.Class()] += w
		if sm.Busy() {
			busy[sm.Tick]++
		}
	}
	for i, n := range busy {
		w := weights[i]
		s.Seconds += w
		s.BusyMean += float64(n) * w
		for len(s.BusySeconds) <= n {
			s.BusySeconds = append(s.BusySeconds, 0)
		}
		s.BusySeconds[n] += w
		if n < s.Jobs {
			s.BelowJobs += w
		}
		if n <= 1 {
			s.AtMostOne += w
		}
		if n == 0 {
			s.NoneBusy += w
		}
	}
}

// Summary is the totals as shares and as means over the rounds.
func (t *TraceTotals) Summary() TraceSummary {
	s := t.s
	s.BusySeconds = slices.Clone(s.BusySeconds)
	if s.Rounds == 0 {
		return s
	}
	if s.Seconds > 0 {
		s.BusyMean /= s.Seconds
	}
	s.Waits, s.Classes = shares(t.waits, s.BackendSeconds), shares(t.classes, s.BackendSeconds)
	r := float64(s.Rounds)
	s.Seconds /= r
	s.BackendSeconds /= r
	s.BelowJobs /= r
	s.AtMostOne /= r
	s.NoneBusy /= r
	for i := range s.BusySeconds {
		s.BusySeconds[i] /= r
	}
	return s
}

// tickWeights is how long each tick stands for: until the next one, the
// last one TraceInterval. A tick the server was slow to answer thus
// counts for the time it really covered.
func tickWeights(ticks []time.Duration) []float64 {
	w := make([]float64, len(ticks))
	for i := range ticks {
		d := TraceInterval
		if i+1 < len(ticks) {
			d = ticks[i+1] - ticks[i]
		}
		w[i] = d.Seconds()
	}
	return w
}

// shares are the keys' parts of total, largest first (ties by key).
func shares(m map[string]float64, total float64) []Share {
	out := make([]Share, 0, len(m))
	for k, v := range m {
		if total > 0 {
			out = append(out, Share{k, v / total})
		}
	}
	slices.SortFunc(out, func(a, b Share) int {
		if c := cmp.Compare(b.Share, a.Share); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	return out
}

// WaitsLine is the largest n waits as "CPU 61%, IO:DataFileWrite 12%, ...",
// the rest summed as "rest".
func (s TraceSummary) WaitsLine(n int) string { return topShares(s.Waits, n) }

// ClassesLine is the largest n activity classes, as WaitsLine.
func (s TraceSummary) ClassesLine(n int) string { return topShares(s.Classes, n) }

func topShares(sh []Share, n int) string {
	var parts []string
	var rest float64
	for i, x := range sh {
		if i < n {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", x.Key, 100*x.Share))
		} else {
			rest += x.Share
		}
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("rest %.0f%%", 100*rest))
	}
	if len(parts) == 0 {
		return "nothing sampled"
	}
	return strings.Join(parts, ", ")
}

// BusyLine says how many backends were busy: the mean, and the seconds
// with fewer than -j, at most one, and none.
func (s TraceSummary) BusyLine() string {
	return fmt.Sprintf("mean %.1f busy of -j%d; fewer than %d for %.1f s of %.1f s, at most 1 for %.1f s, none for %.1f s",
		s.BusyMean, s.Jobs, s.Jobs, s.BelowJobs, s.Seconds, s.AtMostOne, s.NoneBusy)
}

// String is the summary on one line, for a results table.
func (s TraceSummary) String() string {
	return fmt.Sprintf("waits: %s; work: %s; backends: %s", s.WaitsLine(5), s.ClassesLine(5), s.BusyLine())
}
