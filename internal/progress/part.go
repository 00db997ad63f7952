package progress

import "sync"

// Parts shares one Reporter among pipelines that run at once as parts of
// one run: the databases of restore --all and clone --all. Their plans
// add up (each part's Begin reports the sum so far, so the totals grow as
// the parts start, as the steps do), and their phases and work are named
// after their part, so that one progress stream covers them all.
type Parts struct {
	r    Reporter
	mu   sync.Mutex
	plan Plan
}

// NewParts shares r among the parts of a run of op ("restore", "clone").
func NewParts(r Reporter, op string) *Parts {
	return &Parts{r: r, plan: Plan{Op: op}}
}

// Part returns the Reporter of the part called name (a database).
func (p *Parts) Part(name string) Reporter { return part{p: p, name: name} }

type part struct {
	p    *Parts
	name string
}

// Begin implements Reporter: the part's plan is added to the run's.
func (r part) Begin(pl Plan) {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	r.p.plan.Tables += pl.Tables
	r.p.plan.Chunks += pl.Chunks
	r.p.plan.Bytes += pl.Bytes
	r.p.plan.Rows += pl.Rows
	r.p.r.Begin(r.p.plan)
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
