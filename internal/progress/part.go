package progress

import "sync"

// Parts shares one Reporter among pipelines that run at once as parts of
// one run: the databases of restore --all and clone --all. The run's plan
// is the sum of its parts' plans: what each part expects (Expect) until it
// begins, then what its own Begin reports, so that the totals cover the
// whole run from its start instead of growing as the parts start (a bar at
// 100% after the first database, then falling back). Phases and work are
// named after their part, so that one progress stream covers them all.
type Parts struct {
	r     Reporter
	mu    sync.Mutex
	op    string
	plans map[string]Expected // each part's: expected, or its own once begun
	begun map[string]bool
}

// NewParts shares r among the parts of a run of op ("restore", "clone").
func NewParts(r Reporter, op string) *Parts {
	return &Parts{r: r, op: op, plans: map[string]Expected{}, begun: map[string]bool{}}
}

// Expect announces the work of the parts about to run (a database's
// totals as the archive or the source's catalog knows them), before any
// of them begins: the run's totals then count it from the start.
func (p *Parts) Expect(plans map[string]Expected) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, pl := range plans {
		if !p.begun[name] {
			p.plans[name] = pl
		}
	}
	p.r.Begin(p.total())
}

// total is the run's plan: the sum of its parts'. A part not begun counts
// at least one chunk, so that a run whose begun parts have moved all their
// chunks does not look finished (Tracker.State takes what moved as an
// estimated run's total once every chunk is done).
func (p *Parts) total() Expected {
	t := Expected{Op: p.op}
	for name, pl := range p.plans {
		t.Tables += pl.Tables
		t.Bytes += pl.Bytes
		t.Rows += pl.Rows
		t.Estimated = t.Estimated || pl.Estimated
		if p.begun[name] {
			t.Chunks += pl.Chunks
		} else {
			t.Chunks += max(pl.Chunks, 1)
		}
	}
	return t
}

// Part returns the Reporter of the part called name (a database).
func (p *Parts) Part(name string) Reporter { return part{p: p, name: name} }

type part struct {
	p    *Parts
	name string
}

// Begin implements Reporter: the part's plan replaces what it was
// expected to do in the run's.
func (r part) Begin(pl Expected) {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.plans[r.name] = pl
	r.p.begun[r.name] = true
	r.p.r.Begin(r.p.total())
}

// Phase implements Reporter.
func (r part) Phase(name string) { r.p.r.Phase(r.name + ": " + name) }

// Steps implements Reporter.
func (r part) Steps(n int) { r.p.r.Steps(n) }

// Start implements Reporter.
func (r part) Start(w Work) { r.p.r.Start(r.named(w)) }

// Add implements Reporter.
func (r part) Add(bytes, rows int64) { r.p.r.Add(bytes, rows) }

// Done implements Reporter.
func (r part) Done(w Work, d Done) { r.p.r.Done(r.named(w), d) }

// named prefixes a unit's table and name with the part's name: tables of
// the same name in two databases are two tables.
func (r part) named(w Work) Work {
	if w.Table != "" {
		w.Table = r.name + ": " + w.Table
	}
	w.Name = r.name + ": " + w.Name
	return w
}

// Phase names a step of the whole run (e.g. "globals"), outside any part.
func (p *Parts) Phase(name string) { p.r.Phase(name) }
