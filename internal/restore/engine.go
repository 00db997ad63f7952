package restore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/tempfile"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// defaultSplitMinBytes is the smallest chunk worth loading on several
// connections: below it, the extra connections cost more than they save,
// and a chunk loaded on one connection can use COPY FREEZE.
const defaultSplitMinBytes = 256 << 20

// postDataScript reads the schema archive's post-data entries with their
// SQL and dependencies. An error means the post-data cannot be taken apart
// and pg_restore must do all of it.
func (r *run) postDataScript(ctx context.Context) (*toc.Script, error) {
	// Indexes' statistics are post-data too: they come with the others
	// (restoreStatistics), never before their table's data is in.
	noStats := r.statisticsFlag()
	list, err := r.pgRestoreCmd(ctx, "--list", "--section=post-data", noStats, r.schema).Output()
	if err != nil {
		return nil, fmt.Errorf("pg_restore --list: %w", err)
	}
	ids, err := toc.ListIDs(string(list))
	if err != nil {
		return nil, err
	}
	args := append([]string{"--verbose", "--file=-", "--section=post-data", noStats}, r.ownershipFlags()...)
	if r.sel.ids != nil {
		ids = keepIDs(ids, r.sel.ids)
		args = append(args, r.sel.useList())
	}
	script, err := r.pgRestoreCmd(ctx, append(args, r.schema)...).Output()
	if err != nil {
		return nil, fmt.Errorf("pg_restore --file: %w", err)
	}
	return toc.ParseScript(string(script), ids)
}

// buildGraph lays out the whole data and post-data work: one task per chunk
// (or per connection for a large chunk), per large object, then the
// post-data plan unless script is nil.
func (r *run) buildGraph(script *toc.Script) (*schedule.Graph, error) {
	g := &schedule.Graph{}
	chunksOf := map[int]int{}
	for _, c := range r.m.Chunks {
		chunksOf[c.Table]++
	}
	splitMin := r.opts.SplitMinBytes
	switch {
	case splitMin == 0:
		splitMin = defaultSplitMinBytes
	case splitMin < 0:
		splitMin = math.MaxInt64
	}
	tables := map[string]schedule.TableFacts{}
	for i := range r.m.Chunks {
		c := &r.m.Chunks[i]
		if r.missing(c.Stream) {
			return nil, fmt.Errorf("archive has no data for table %s", r.tableName(c))
		}
		t := r.m.Tables[c.Table]
		estimate := c.Size
		if estimate <= 0 {
			estimate = t.SizeBytes / int64(chunksOf[c.Table])
		}
		size := r.plannedBytes(c.Stream, estimate)
		key := schedule.TableKey(t.Schema, t.Name)
		f := tables[key]
		f.Size += size
		name := "load " + r.tableName(c)
		lock := []schedule.Lock{{Key: key, Mode: schedule.RowExclusive}}
		switch {
		case r.opts.Jobs > 1 && size >= splitMin && c.Where == "" && !c.Binary: // parts are cut at text rows
			sl := newSplitLoad(c, r.opts.Jobs)
			for p := range r.opts.Jobs {
				f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: fmt.Sprintf("%s (part %d/%d)", name, p+1, r.opts.Jobs),
					Step: chunkStep(c.Stream), Kind: schedule.Data, Cost: size, Locks: lock, Table: key, Data: &load{chunk: c, split: sl}}))
			}
		case chunksOf[c.Table] == 1 && c.Where == "" && !r.sel.dataOnly:
			lock = []schedule.Lock{{Key: key, Mode: schedule.AccessExclusive}}
			f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: name, Step: chunkStep(c.Stream), Kind: schedule.Data, Cost: size,
				Locks: lock, Table: key, Data: &load{chunk: c, freeze: true}}))
		default:
			f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: name, Step: chunkStep(c.Stream), Kind: schedule.Data, Cost: size,
				Locks: lock, Table: key, Data: &load{chunk: c}}))
		}
		tables[key] = f
	}
	if r.sel.dataOnly && !r.opts.DisableTriggers {
		loads := map[string][]int{}
		for k, f := range tables {
			loads[k] = f.Loads
		}
		if err := orderLoads(g, loads, r.sel.refs); err != nil {
			return nil, err
		}
	}
	for i := range r.m.LargeObjects {
		if lo := &r.m.LargeObjects[i]; r.missing(lo.Stream) {
			return nil, fmt.Errorf("archive has no data for large object %d", lo.OID)
		}
	}
	batches, sizes := batchLargeObjects(r.m.LargeObjects, func(lo *archive.LargeObject) int64 { return r.plannedBytes(lo.Stream, lo.Size) })
	for i, los := range batches {
		name := fmt.Sprintf("large object %d", los[0].OID)
		if len(los) > 1 {
			name = fmt.Sprintf("large objects %d to %d (%d)", los[0].OID, los[len(los)-1].OID, len(los))
		}
		// No step of its own: each object records its own (loadLargeObjects).
		g.Add(&schedule.Task{Name: name, Kind: schedule.Data, Cost: sizes[i], Data: &load{los: los}})
	}
	if script == nil {
		return g, nil
	}
	if _, err := schedule.PlanPostData(g, script, schedule.PlanOptions{Tables: tables, Analyze: !r.opts.NoAnalyze, Statistics: r.stats.tables}); err != nil {
		return nil, err
	}
	if r.m.Encoding == "UTF8" {
		// A fused task's SQL is sent in the load's session, whose
		// client_encoding (UTF8) must be the script's (the archive's).
		g = schedule.FuseSmallTables(g, fuseMaxBytes)
	}
	return g, nil
}

// fuseMaxBytes is the largest table whose indexes, constraints and ANALYZE
// run in its load's transaction (schedule.FuseSmallTables): for a small
// table they take less than the round trips and commits they would cost
// apart, and nothing is lost by not building them beside other work.
const fuseMaxBytes = 1 << 20

// keepIDs returns the ids in chosen, in their order.
func keepIDs(ids []int, chosen map[int]bool) []int {
	var out []int
	for _, id := range ids {
		if chosen[id] {
			out = append(out, id)
		}
	}
	return out
}

// engine runs a graph's tasks on one connection per worker.
type engine struct {
	r        *run
	preamble []string
	conns    []*workerConn
	rows     atomic.Int64
}

// workerConn is a worker's connection and the session mode it is in: for
// COPY it is UTF8 (SQL_ASCII for a SQL_ASCII archive), COPY text naming
// its own encoding (EncodingOption), while pg_dump's SQL runs with
// pg_restore's session settings, its client_encoding included.
type workerConn struct {
	conn *pgx.Conn
	mode sessionMode
}

// sessionMode is what a worker connection was last set up for.
type sessionMode int

const (
	fresh sessionMode = iota
	copyMode
	sqlMode
)

// runGraph executes the graph and records the phase report.
func (r *run) runGraph(ctx context.Context, g *schedule.Graph, script *toc.Script) error {
	e := &engine{r: r, conns: make([]*workerConn, r.opts.Jobs)}
	if script != nil {
		e.preamble = script.Preamble
	}
	defer func() {
		for _, c := range e.conns {
			if c != nil {
				c.conn.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	plan, steps := r.planOf(g)
	r.opts.Progress.Begin(plan)
	r.opts.Progress.Steps(steps)
	r.opts.Progress.Phase("data and indexes")
	start := time.Now()
	timings, err := g.Run(ctx, r.opts.Jobs, e.report)
	r.report(g, timings, start)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("restore interrupted: %w", context.Cause(ctx))
		}
		return err
	}
	r.res.Rows = e.rows.Load()
	return nil
}

// conn returns worker w's connection, set up for COPY or for SQL.
func (e *engine) conn(ctx context.Context, w int, mode sessionMode) (*pgx.Conn, error) {
	c := e.conns[w]
	if c == nil {
		conn, err := e.r.connectWorker(ctx)
		if err != nil {
			return nil, err
		}
		c = &workerConn{conn: conn}
		e.conns[w] = c
	}
	if c.mode == mode {
		return c.conn, nil
	}
	var setup []string
	if mode == sqlMode {
		setup = e.preamble
	} else {
		setup = []string{"SET client_encoding TO 'UTF8'"}
		if e.r.m.Encoding == "SQL_ASCII" {
			setup = []string{"SET client_encoding TO 'SQL_ASCII'"}
		}
	}
	for _, s := range setup {
		if _, err := c.conn.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("set up restore session: %w", err)
		}
	}
	c.mode = mode
	return c.conn, nil
}

// report runs a task and tells the progress reporter about it.
func (e *engine) report(ctx context.Context, w int, t *schedule.Task) error {
	work := e.r.workOf(t)
	e.r.opts.Progress.Start(work)
	began := time.Now()
	err := e.exec(ctx, w, t)
	if err == nil {
		e.r.opts.Progress.Done(work, e.r.doneOf(t, time.Since(began)))
	}
	return err
}

// exec runs one task. A task an earlier run finished (the journal says so)
// is skipped; every other one commits its work together with its journal
// row.
func (e *engine) exec(ctx context.Context, w int, t *schedule.Task) error {
	if e.r.j.isDone(t.Step) {
		return e.then(ctx, w, t.Then)
	}
	switch t.Kind {
	case schedule.Data:
		conn, err := e.conn(ctx, w, copyMode)
		if err != nil {
			return err
		}
		l := t.Data.(*load)
		var n int64
		switch {
		case l.los != nil:
			return e.r.loadLargeObjects(ctx, conn, l.los)
		case l.split != nil:
			n, err = e.r.loadPart(ctx, conn, l.split)
		default:
			then, fused := e.fusedSQL(conn, t.Then)
			n, err = e.r.loadChunk(ctx, conn, l.chunk, l.freeze, then)
			if err == nil && !fused {
				err = e.then(ctx, w, t.Then)
			}
		}
		e.rows.Add(n)
		return err
	case schedule.Rest:
		return e.r.restoreEntries(ctx, t.Entries, t.Step)
	case schedule.Analyze:
		conn, err := e.conn(ctx, w, sqlMode)
		if err != nil {
			return err
		}
		schema, name, _ := strings.Cut(t.Table, "\x00")
		if err := e.inTx(ctx, conn, t.Step, "ANALYZE "+pg.Qualified(schema, name)); err != nil {
			return fmt.Errorf("analyze %s: %w", pg.Qualified(schema, name), err)
		}
		return nil
	}
	conn, err := e.conn(ctx, w, sqlMode)
	if err != nil {
		return err
	}
	if err := e.inTx(ctx, conn, t.Step, t.SQL...); err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	return nil
}

// fusedSQL is what a load's transaction runs after its COPY for the tasks
// fused into it: pg_restore's session settings (as the SQL connections
// have them: the script's statements assume them), then each task's
// statements and journal row. They go in the load's last round trip, which
// the server parses whole before running any of it: so only in a session
// whose client_encoding and standard_conforming_strings are already the
// script's (UTF8, on); otherwise false, and the caller runs them apart.
func (e *engine) fusedSQL(conn *pgx.Conn, then []schedule.Fused) ([]string, bool) {
	if len(then) == 0 {
		return nil, true
	}
	pc := conn.PgConn()
	if pc.ParameterStatus("client_encoding") != "UTF8" || pc.ParameterStatus("standard_conforming_strings") != "on" {
		return nil, false
	}
	out := append([]string{}, e.preamble...)
	for _, f := range then {
		out = append(out, f.SQL...)
		if f.Step != "" {
			out = append(out, e.r.j.recordSQL(f.Step))
		}
	}
	return out, true
}

// then runs the tasks fused into a load one by one, each in its own
// transaction, skipping those the journal records: when the load's session
// cannot take them (fusedSQL), or the load was done by an earlier run that
// did not fuse them.
func (e *engine) then(ctx context.Context, w int, then []schedule.Fused) error {
	for _, f := range then {
		if e.r.j.isDone(f.Step) {
			continue
		}
		conn, err := e.conn(ctx, w, sqlMode)
		if err != nil {
			return err
		}
		if err := e.inTx(ctx, conn, f.Step, f.SQL...); err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
	}
	return nil
}

// inTx runs statements and records step in one transaction. CREATE INDEX,
// ALTER TABLE ... ADD CONSTRAINT / VALIDATE CONSTRAINT and ANALYZE are all
// transactional, so an interrupted one leaves nothing behind. The whole
// transaction (BEGIN, the statements, the journal row, COMMIT) goes in one
// simple query, one round trip instead of one per statement: a restore of
// many small tables runs about five such tasks per table. The server stops
// at the first error and skips the rest, COMMIT included; the ROLLBACK then
// ends the failed transaction.
func (e *engine) inTx(ctx context.Context, conn *pgx.Conn, step string, stmts ...string) error {
	var b strings.Builder
	b.WriteString("BEGIN")
	for _, s := range stmts {
		b.WriteString(";\n")
		b.WriteString(s)
	}
	if step != "" {
		b.WriteString(";\n")
		b.WriteString(e.r.j.recordSQL(step))
	}
	b.WriteString(";\nCOMMIT")
	if _, err := conn.Exec(ctx, b.String()); err != nil {
		if !conn.IsClosed() {
			conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		return err
	}
	return nil
}

// restoreEntries restores the listed entries in the listed (pg_dump's)
// order, atomically with their journal step.
func (r *run) restoreEntries(ctx context.Context, ids []int, step string) error {
	if len(ids) == 0 {
		return nil
	}
	f, err := tempfile.Create("", tempfile.List)
	if err != nil {
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	defer os.Remove(f.Name())
	var b bytes.Buffer
	for _, id := range ids {
		b.WriteString(strconv.Itoa(id) + ";\n")
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	return r.pgRestoreAtomic(ctx, step, "--use-list="+f.Name())
}

// report turns task timings into the phase report: for each kind of task,
// the wall time from its first start to its last end (phases overlap: an
// index builds while other tables load), the time summed over workers, and
// the slowest tasks.
func (r *run) report(g *schedule.Graph, timings []schedule.Timing, start time.Time) {
	type span struct {
		first, last, busy time.Duration
		n                 int
	}
	spans := map[schedule.Kind]*span{}
	for _, tm := range timings {
		k := g.Tasks[tm.Task].Kind
		s := spans[k]
		if s == nil {
			s = &span{first: tm.Start}
			spans[k] = s
		}
		s.first = min(s.first, tm.Start)
		s.last = max(s.last, tm.End)
		s.busy += tm.End - tm.Start
		s.n++
	}
	offset := start.Sub(r.begin)
	for k := schedule.Data; k <= schedule.Analyze; k++ {
		if s := spans[k]; s != nil {
			r.res.Phases = append(r.res.Phases, Phase{Name: k.String(), Start: offset + s.first,
				Elapsed: s.last - s.first, Busy: s.busy, Items: s.n})
		}
	}
	sorted := append([]schedule.Timing{}, timings...)
	sort.Slice(sorted, func(i, j int) bool {
		return sorted[i].End-sorted[i].Start > sorted[j].End-sorted[j].Start
	})
	for _, tm := range sorted[:min(len(sorted), 5)] {
		r.res.Slowest = append(r.res.Slowest, Item{Name: g.Tasks[tm.Task].Name, Elapsed: tm.End - tm.Start})
	}
}
