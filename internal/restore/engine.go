package restore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// engine runs a graph's tasks on one connection per worker: the data
// stage's loads (loader) and the post-data stage's SQL.
type engine struct {
	r        *loader
	schema   *schemaArchive
	t        *target
	preamble []string
	conns    []*workerConn
	rows     atomic.Int64
	kg       *keepGoing // --keep-going: the rest of post-data goes on entry by entry past a failure
}

// workerConn is a worker's connection and the session mode it is in: for
// COPY it is UTF8 (SQL_ASCII for a SQL_ASCII archive), COPY text naming
// its own encoding (pg.Copy's Encoding), while pg_dump's SQL runs with
// pg_restore's session settings, its client_encoding included. Every
// connection gets pg_restore's settings once, when it opens: the two modes
// differ in client_encoding only, and not at all for a UTF8 archive.
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

// runGraph executes the graph, records the phase report and returns the
// rows loaded and the slowest tasks.
func (d *dataStage) runGraph(ctx context.Context, g *schedule.Graph, post *postData) (int64, []SlowTask, error) {
	e := &engine{r: d.l, schema: d.schema, t: d.target, conns: make([]*workerConn, d.opts.Jobs), preamble: post.preamble()}
	defer func() {
		for _, c := range e.conns {
			if c != nil {
				c.conn.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	plan, steps := d.planOf(g)
	d.opts.Progress.Begin(plan)
	d.opts.Progress.Steps(steps)
	d.opts.Progress.Phase("data and indexes")
	start := time.Now()
	e.kg = d.kg
	var timings []taskgraph.Timing
	var err error
	if d.kg != nil {
		var failures []taskgraph.Failure
		timings, failures, err = g.RunKeepGoing(ctx, d.opts.Jobs, e.report)
		for _, f := range failures {
			kf := Failure{Object: g.Tasks[f.Task].Name, Error: pgMessage(f.Err)}
			for _, s := range f.Skipped {
				kf.Skipped = append(kf.Skipped, g.Tasks[s].Name)
			}
			d.kg.addTask(kf)
		}
	} else {
		timings, err = g.Run(ctx, d.opts.Jobs, e.report)
	}
	slowest := d.report(g, timings, start)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("restore interrupted: %w", context.Cause(ctx))
		}
		return 0, nil, err
	}
	return e.rows.Load(), slowest, nil
}

// conn returns worker w's connection, set up for COPY or for SQL. A new
// connection runs pg_restore's session settings (the preamble) first, in
// one round trip; no statement of the restore changes them afterwards
// (entries' own settings are default_tablespace and
// default_table_access_method, which are not in the preamble), so
// switching modes only sets client_encoding, and nothing when the COPY's
// client_encoding is the preamble's (oneMode).
func (e *engine) conn(ctx context.Context, w int, mode sessionMode) (*pgx.Conn, error) {
	c := e.conns[w]
	if c == nil {
		conn, err := e.r.connectWorker(ctx)
		if err != nil {
			return nil, err
		}
		c = &workerConn{conn: conn}
		if len(e.preamble) > 0 {
			if _, err := conn.Exec(ctx, strings.Join(e.preamble, "\n")); err != nil {
				conn.Close(context.WithoutCancel(ctx))
				return nil, fmt.Errorf("set up restore session: %w", err)
			}
			c.mode = sqlMode
		}
		e.conns[w] = c
	}
	if c.mode == mode || (c.mode != fresh && e.oneMode()) {
		c.mode = mode
		return c.conn, nil
	}
	setup := "SET client_encoding TO " + pg.Literal(e.copyEncoding())
	if mode == sqlMode {
		setup = strings.Join(e.preamble, "\n")
	}
	if _, err := c.conn.Exec(ctx, setup); err != nil {
		return nil, fmt.Errorf("set up restore session: %w", err)
	}
	c.mode = mode
	return c.conn, nil
}

// copyEncoding is the client_encoding of a COPY session.
func (e *engine) copyEncoding() string {
	if e.r.m.Encoding == "SQL_ASCII" {
		return "SQL_ASCII"
	}
	return "UTF8"
}

// oneMode reports whether a session set up for COPY is also set up for
// SQL: pg_restore's preamble sets client_encoding to the COPY's.
func (e *engine) oneMode() bool {
	enc, ok := preambleEncoding(e.preamble)
	return ok && enc == e.copyEncoding()
}

// preambleEncoding is the client_encoding pg_restore's preamble sets
// ("SET client_encoding = 'UTF8';").
func preambleEncoding(preamble []string) (string, bool) {
	for _, s := range preamble {
		rest, ok := strings.CutPrefix(s, "SET client_encoding = '")
		if enc, ok2 := strings.CutSuffix(rest, "';"); ok && ok2 && !strings.ContainsAny(enc, "'\\") {
			return enc, true
		}
	}
	return "", false
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
	if e.r.j.IsDone(t.Step) {
		return e.then(ctx, w, t.Then)
	}
	switch t.Kind {
	case taskgraph.Data:
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
			n, err = e.r.loadChunks(ctx, conn, l.chunks, l.freeze, then)
			if err == nil && !fused {
				err = e.then(ctx, w, t.Then)
			}
		}
		e.rows.Add(n)
		return err
	case taskgraph.Rest:
		// The listed entries in the listed (pg_dump's) order, atomically
		// with their journal step.
		if len(t.Entries) == 0 {
			return nil
		}
		err := e.schema.restoreIDs(ctx, e.t, t.Step, t.Entries)
		if err != nil && e.kg != nil && ctx.Err() == nil {
			return e.restEach(ctx, t)
		}
		return err
	case taskgraph.Analyze:
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
// fused into it: each task's statements, then their journal steps. They go in the
// load's last round trip, which the server parses whole before running any
// of it, and they assume pg_restore's session settings, which the
// connection has had since it opened (conn): so only in a session whose
// client_encoding is still the preamble's and standard_conforming_strings
// on; otherwise false, and the caller runs them apart.
func (e *engine) fusedSQL(conn *pgx.Conn, then []schedule.Fused) (tail, bool) {
	if len(then) == 0 {
		return tail{}, true
	}
	pc := conn.PgConn()
	enc, ok := preambleEncoding(e.preamble)
	if !ok || pc.ParameterStatus("client_encoding") != enc || pc.ParameterStatus("standard_conforming_strings") != "on" {
		return tail{}, false
	}
	var out tail
	for i := range then {
		out.sql = append(out.sql, then[i].SQL()...)
		out.steps = append(out.steps, then[i].Step())
	}
	return out, true
}

// then runs the tasks fused into a load one by one, each in its own
// transaction, skipping those the journal records: when the load's session
// cannot take them (fusedSQL), or the load was done by an earlier run that
// did not fuse them.
func (e *engine) then(ctx context.Context, w int, then []schedule.Fused) error {
	for i := range then {
		f := &then[i]
		step := f.Step()
		if e.r.j.IsDone(step) {
			continue
		}
		conn, err := e.conn(ctx, w, sqlMode)
		if err != nil {
			return err
		}
		if err := e.inTx(ctx, conn, step, f.SQL()...); err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
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
		b.WriteString(e.r.j.RecordSQL(step))
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

// report turns task timings into the phase report: for each kind of task,
// the wall time from its first start to its last end (phases overlap: an
// index builds while other tables load), the time summed over workers, and
// the slowest tasks, which it returns.
func (d *dataStage) report(g *schedule.Graph, timings []taskgraph.Timing, start time.Time) []SlowTask {
	type span struct {
		first, last, busy time.Duration
		n                 int
	}
	spans := map[taskgraph.Group]*span{}
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
	offset := start.Sub(d.phases.begin)
	for k := taskgraph.Data; k <= taskgraph.Analyze; k++ {
		if s := spans[k]; s != nil {
			d.phases.list = append(d.phases.list, Phase{Name: k.String(), Start: offset + s.first,
				Elapsed: s.last - s.first, Busy: s.busy, Items: s.n})
		}
	}
	return slowestTasks(g, timings, 5)
}

// slowestTasks returns the n tasks that took longest, longest first (in
// run order among equals), keeping n as it goes rather than sorting a copy
// of every timing (5 MB at 100,000 tables).
func slowestTasks(g *schedule.Graph, timings []taskgraph.Timing, n int) []SlowTask {
	took := func(tm taskgraph.Timing) time.Duration { return tm.End - tm.Start }
	var top []taskgraph.Timing
	for _, tm := range timings {
		if i := sort.Search(len(top), func(i int) bool { return took(top[i]) < took(tm) }); i < n {
			top = slices.Insert(top, i, tm)[:min(len(top)+1, n)]
		}
	}
	var slowest []SlowTask
	for _, tm := range top {
		slowest = append(slowest, SlowTask{Name: g.Tasks[tm.Task].Name, Elapsed: took(tm)})
	}
	return slowest
}

// restEach is the rest of post-data with --keep-going, once its one
// transaction failed: entry by entry, each with its own journal step, so
// that one entry's failure (and those of the entries that depend on it,
// which fail too) leaves the others in. Failures go to the report; the
// task's own step is recorded only when every entry is in.
func (e *engine) restEach(ctx context.Context, t *schedule.Task) error {
	failed := false
	for _, id := range t.Entries {
		step := t.Step + " " + strconv.Itoa(id)
		if e.r.j.IsDone(step) {
			continue
		}
		if err := e.schema.restoreIDs(ctx, e.t, step, []int{id}); err != nil {
			if ctx.Err() != nil {
				return err
			}
			failed = true
			name := strconv.Itoa(id)
			if en := e.kg.entries[id]; en != nil {
				name = describe(en)
			}
			e.kg.addTask(Failure{Object: name, Error: pgMessage(err)})
		}
	}
	if failed {
		return nil
	}
	conn, err := pg.Connect(ctx, e.t.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return e.r.j.Record(ctx, conn, t.Step)
}
