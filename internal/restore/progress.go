package restore

import (
	"io"
	"time"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// countingSource counts the bytes and rows read from data and large object
// streams, so that progress moves while a large chunk loads, without the
// loaders knowing about it.
type countingSource struct {
	archive.Source
	rep    progress.Reporter
	schema uint32
	lo     map[uint32]bool // large objects: bytes, no rows
	binary map[uint32]bool // binary COPY chunks: rows counted at their end
}

func newCountingSource(src archive.Source, rep progress.Reporter) archive.Source {
	m := src.Manifest()
	lo, binary := map[uint32]bool{}, map[uint32]bool{}
	for _, l := range m.LargeObjects {
		lo[l.Stream] = true
	}
	for _, c := range m.Chunks {
		if c.Binary {
			binary[c.Stream] = true
		}
	}
	return &countingSource{Source: src, rep: rep, schema: m.SchemaStream, lo: lo, binary: binary}
}

// OpenStream implements archive.Source.
func (s *countingSource) OpenStream(id uint32) io.ReadCloser {
	rc := s.Source.OpenStream(id)
	if id == s.schema {
		return rc
	}
	c := progress.NewReader(rc, s.rep)
	c.Binary = s.lo[id] || s.binary[id]
	cs := &countingStream{Counter: c, rc: rc, rep: s.rep}
	if s.binary[id] {
		// Binary COPY has no line per row: its rows are reported once the
		// stream's totals are known.
		cs.rowsAtEnd = func() int64 {
			if info, ok := s.Source.Stream(id); ok {
				return info.Rows
			}
			return 0
		}
	}
	return cs
}

type countingStream struct {
	*progress.Counter
	rc        io.ReadCloser
	rep       progress.Reporter
	rowsAtEnd func() int64 // nil: rows were counted as they went
}

// Close reports what is left and closes the stream.
func (s *countingStream) Close() error {
	s.Flush()
	if s.rowsAtEnd != nil {
		if n := s.rowsAtEnd(); n > 0 {
			s.rep.Add(0, n)
		}
	}
	return s.rc.Close()
}

// planOf is a restore's work: the archive's exact totals and the graph's
// data tasks (a table split over several connections counts once per
// connection).
func (d *dataStage) planOf(g *schedule.Graph) (progress.Expected, int) {
	live := d.l.ar.Order() == archive.OnDemand // clone's source: the user ran clone
	op := "restore"
	if live {
		op = "clone"
	}
	p := progress.Expected{Op: op, Tables: len(d.m.Tables), Workers: d.opts.Jobs}
	steps := 0
	for _, t := range g.Tasks {
		if t.Kind == taskgraph.Data {
			p.Chunks++
		} else {
			steps++
			p.StepWork += stepWork(t.Kind, t.Cost)
		}
	}
	if d.l.indexed {
		p.Bytes, p.Rows = archive.Totals(d.l.ar, d.m)
		return p, steps
	}
	// A source read as it comes (a live source, whose totals come when
	// its COPYs end; a pipe, with each stream's end) has the catalog's
	// estimates, as a dump shows them, so that a 12 GiB clone has a size
	// to go by and an ETA (it had neither). Each unit's done replaces its
	// estimate (doneOf); every chunk done, the tracker takes what moved as
	// the total.
	p.Estimated = true
	for _, c := range d.m.Chunks {
		p.Bytes += c.Size
	}
	for _, t := range d.m.Tables {
		p.Rows += t.Rows
	}
	for _, lo := range d.m.LargeObjects {
		p.Bytes += lo.Size
	}
	return p, steps
}

// workOf names a task for progress reports.
func (r *loader) workOf(t *schedule.Task) progress.Work {
	if t.Kind != taskgraph.Data {
		return progress.Work{Kind: t.Kind.String(), Name: t.Name, Expect: stepWork(t.Kind, t.Cost)}
	}
	l := t.Data.(*load)
	if l.los != nil {
		return progress.Work{Kind: "data", Table: "large objects", Name: t.Name}
	}
	if l.split != nil {
		return progress.Work{Kind: "data", Table: r.tableName(l.split.chunk), Name: t.Name}
	}
	whole := len(l.chunks) > 1 || l.chunks[0].Where == "" // every chunk of the table, or its only one
	return progress.Work{Kind: "data", Table: r.tableName(l.chunks[0]), Name: t.Name, Whole: whole}
}

// doneOf is what a finished task moved, from the archive's totals: a part
// of a split load is given an equal share of its chunk. From a source
// that did not know its totals up front (planOf), it says too what the
// plan had estimated of it.
func (r *loader) doneOf(t *schedule.Task, elapsed time.Duration) progress.Done {
	d := progress.Done{Elapsed: elapsed}
	if t.Kind != taskgraph.Data {
		d.Work = stepWork(t.Kind, t.Cost)
		return d
	}
	l := t.Data.(*load)
	switch {
	case l.los != nil:
		for _, lo := range l.los {
			if info, ok := r.ar.Stream(lo.Stream); ok {
				d.Bytes += info.RawBytes
			}
			if !r.indexed {
				d.Planned += lo.Size
			}
		}
	case l.split != nil:
		if info, ok := r.ar.Stream(l.split.chunk.Stream); ok {
			d.Bytes, d.Rows = info.RawBytes/int64(l.split.parts), info.Rows/int64(l.split.parts)
		}
		if !r.indexed {
			d.Planned = l.split.chunk.Size / int64(l.split.parts)
		}
	default:
		for _, c := range l.chunks {
			if info, ok := r.ar.Stream(c.Stream); ok {
				d.Bytes += info.RawBytes
				d.Rows += info.Rows
			}
			if !r.indexed {
				d.Planned += c.Size
			}
		}
	}
	return d
}

// The weights of stepWork: how many bytes of data a task takes as long as
// to load, per byte of the tables it reads (its Cost). An index build
// reads its table once and sorts one column's keys: about a quarter of
// loading it (TPC-H's lineitem, eight indexes, on 2 cores). A foreign
// key's cost is its tables' (both of them for VALIDATE), which it joins.
// ANALYZE reads a sample of 30,000 rows, whatever the table's size.
const (
	indexWeight      = 0.25
	foreignKeyWeight = 0.1
	analyzeWeight    = 0.05
	analyzeMax       = 32 << 20
	restWork         = 1 << 20
)

// stepWork is a non-data task's work in bytes of data that take as long
// to load (progress.Expected.StepWork), from its kind and the sizes of the
// tables it reads: what lets the ETA cover index builds, constraints and
// ANALYZE, which took a third of a restore after its data ETA had gone.
// A key made of its built index and a foreign key added NOT VALID take
// milliseconds and are weighed as their kind all the same: counting them
// as nothing alone made the ETA at half time worse (TPC-H SF 1 32-34%
// against 7-17%, mixed 54-57% against 47-56%), as the weights are
// calibrated with them in (docs/BENCHMARKS.md).
func stepWork(kind taskgraph.Group, cost int64) int64 {
	switch kind {
	case taskgraph.Index, taskgraph.Constraint:
		return int64(float64(cost) * indexWeight)
	case taskgraph.ForeignKey:
		return int64(float64(cost) * foreignKeyWeight)
	case taskgraph.Analyze:
		return min(int64(float64(cost)*analyzeWeight), analyzeMax)
	case taskgraph.Data:
		return 0
	}
	return restWork
}
