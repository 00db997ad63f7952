package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// dataStage is the data stage: sequence values, then one task graph that
// loads every chunk and large object of the selection on Jobs connections
// (loader) with the post-data stage's tasks beside them, then the
// source's end check. It is built from the pre-data stage's target.
type dataStage struct {
	opts   Options
	m      *archive.Manifest // the selection's
	sel    *selection
	stats  statistics
	target *target
	schema *schemaArchive
	log    *slog.Logger
	phases *phases
	l      *loader
	// kg, with --keep-going, hears of the tasks that fail; the graph goes
	// on without them and what depends on them.
	kg     *keepGoing
	skip   func(...uint32) // drops streams the restore will not read (openedSource.skip)
	finish func() error    // the source's end check (openedSource.finish)
}

// newDataStage is the data stage of the selection sel into t, reading ar
// (src's source, counting for progress).
func newDataStage(opts Options, ar archive.Source, src *openedSource, sel *selection, stats statistics, t *target, schema *schemaArchive, log *slog.Logger, ph *phases) *dataStage {
	return &dataStage{opts: opts, m: sel.m, sel: sel, stats: stats, target: t, schema: schema, log: log, phases: ph,
		l:    &loader{opts: opts, ar: ar, indexed: src.indexed, demuxed: src.demuxed, m: sel.m, target: t.cfg, j: t.j},
		skip: src.skip, finish: src.finish}
}

// run is the data stage: it returns the rows loaded and the slowest tasks.
func (d *dataStage) run(ctx context.Context, post *postData) (int64, []SlowTask, error) {
	d.skipDone()
	var refs map[string][]string
	if d.sel.dataOnly && !d.opts.DisableTriggers {
		var err error
		if refs, err = d.readForeignKeys(ctx); err != nil {
			return 0, nil, err
		}
	}
	if err := d.phases.run("sequences", func() error { return d.setSequences(ctx) }); err != nil {
		return 0, nil, err
	}
	g, err := d.buildGraph(ctx, post, refs)
	if err != nil {
		return 0, nil, err
	}
	if err := d.resetPartialTables(ctx); err != nil {
		return 0, nil, err
	}
	rows, slowest, err := d.runGraph(ctx, g, post)
	if err != nil {
		return 0, nil, err
	}
	// Every load is in: the source says whether all it delivered was
	// complete and sound.
	if err := d.finish(); err != nil {
		return 0, nil, err
	}
	return rows, slowest, nil
}

// maxLoadsPerTable is how many connections load one table at once
// (taskgraph.Graph.MaxPerTable). On 16 cores (PostgreSQL 18, pgbench -s
// 200, 2.9 GiB in one table) the restore took 8.4 s at -j 8 and 10.0 s
// at -j 16, with 1.5x the machine CPU: sixteen COPYs into one table
// contend for its last page and its extension. The same data in 30
// partitions went on scaling (6.3 s at -j 8, 5.3 s at -j 16).
const maxLoadsPerTable = 8

// defaultSplitMinBytes is the smallest chunk worth loading on several
// connections: below it, the extra connections cost more than they save,
// and a chunk loaded on one connection can use COPY FREEZE.
const defaultSplitMinBytes = 256 << 20

// buildGraph lays out the whole data and post-data work: one task per chunk
// (or per connection for a large chunk), per large object, then the
// post-data stage's tasks (none when pg_restore does post-data after the
// loads). refs are the target's foreign keys, for the order of
// --data-only loads.
func (d *dataStage) buildGraph(ctx context.Context, post *postData, refs map[string][]string) (*schedule.Graph, error) {
	for _, c := range d.m.Chunks {
		if d.l.missing(c.Stream) {
			return nil, fmt.Errorf("archive has no data for table %s", d.l.tableName(&c))
		}
	}
	g := &schedule.Graph{MaxPerTable: maxLoadsPerTable}
	splitMin := d.opts.SplitMinBytes
	switch {
	case splitMin == 0:
		splitMin = defaultSplitMinBytes
	case splitMin < 0:
		splitMin = math.MaxInt64
	}
	lay := d.layout()
	tables := map[string]schedule.TableFacts{}
	for i := range d.m.Chunks {
		c := &d.m.Chunks[i]
		t := d.m.Tables[c.Table]
		size := lay.sizes[i]
		key := taskgraph.TableKey(t.Schema, t.Name)
		f := tables[key]
		name := "load " + d.l.tableName(c)
		lock := []taskgraph.Lock{{Key: key, Mode: taskgraph.RowExclusive}}
		switch all, ok := lay.whole[c.Table]; {
		case ok:
			// Every chunk of the table in one task, made at its first.
			if all[0] != i {
				continue
			}
			l := &load{freeze: true}
			var total int64
			for _, k := range all {
				l.chunks = append(l.chunks, &d.m.Chunks[k])
				total += lay.sizes[k]
			}
			f.Size += total
			f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: fmt.Sprintf("%s (%d chunks)", name, len(all)), Step: chunkStep(c.Stream),
				Kind: taskgraph.Data, Cost: total, Locks: []taskgraph.Lock{{Key: key, Mode: taskgraph.AccessExclusive}}, Table: key, Data: l}))
		case d.opts.Jobs > 1 && size >= splitMin && size > lay.share && c.Where == "" && !c.Binary: // parts are cut at text rows
			f.Size += size
			parts := min(d.opts.Jobs, maxLoadsPerTable)
			sl := newSplitLoad(c, parts)
			for p := range parts {
				f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: fmt.Sprintf("%s (part %d/%d)", name, p+1, parts),
					Step: chunkStep(c.Stream), Kind: taskgraph.Data, Cost: size, Locks: lock, Table: key, Data: &load{chunks: []*archive.Chunk{c}, split: sl}}))
			}
		case lay.per[c.Table] == 1 && c.Where == "" && !d.sel.dataOnly:
			// The table's only load, in a table this restore created:
			// ACCESS EXCLUSIVE for the tasks fused into it
			// (PostDataOptions.FuseBytes), FREEZE only where it pays.
			f.Size += size
			lock = []taskgraph.Lock{{Key: key, Mode: taskgraph.AccessExclusive}}
			f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: name, Step: chunkStep(c.Stream), Kind: taskgraph.Data, Cost: size,
				Locks: lock, Table: key, Data: &load{chunks: []*archive.Chunk{c}, freeze: freezes(size)}}))
		default:
			f.Size += size
			f.Loads = append(f.Loads, g.Add(&schedule.Task{Name: name, Step: chunkStep(c.Stream), Kind: taskgraph.Data, Cost: size,
				Locks: lock, Table: key, Data: &load{chunks: []*archive.Chunk{c}}}))
		}
		tables[key] = f
	}
	if d.sel.dataOnly && !d.opts.DisableTriggers {
		loads := map[string][]int{}
		for k, f := range tables {
			loads[k] = f.Loads
		}
		if err := orderLoads(g, loads, refs); err != nil {
			return nil, err
		}
	}
	for i := range d.m.LargeObjects {
		if lo := &d.m.LargeObjects[i]; d.l.missing(lo.Stream) {
			return nil, fmt.Errorf("archive has no data for large object %d", lo.OID)
		}
	}
	batches, sizes := batchLargeObjects(d.m.LargeObjects, func(lo *archive.LargeObject) int64 { return d.l.plannedBytes(lo.Stream, lo.Size) })
	for i, los := range batches {
		name := fmt.Sprintf("large object %d", los[0].OID)
		if len(los) > 1 {
			name = fmt.Sprintf("large objects %d to %d (%d)", los[0].OID, los[len(los)-1].OID, len(los))
		}
		// No step of its own: each object records its own (loadLargeObjects).
		g.Add(&schedule.Task{Name: name, Kind: taskgraph.Data, Cost: sizes[i], Data: &load{los: los}})
	}
	plan := schedule.PostDataOptions{Tables: tables, Analyze: !d.opts.NoAnalyze, Statistics: d.stats.tables,
		SmallBytes: fuseMaxBytes, Done: d.target.j.IsDone}
	if d.m.Encoding == "UTF8" && d.kg == nil {
		// Small tables' tasks are fused into their loads as they are
		// planned (schedule.PostDataOptions.FuseBytes). A fused task's SQL is sent
		// in the load's session, whose client_encoding (UTF8) must be the
		// script's (the archive's). Not with --keep-going: an index that
		// fails must not take its table's rows with it.
		plan.FuseBytes = fuseMaxBytes
	}
	post.addTasks(ctx, g, plan)
	return g, nil
}

// layout is how the data stage cuts its loads into tasks.
type layout struct {
	sizes []int64 // each chunk's bytes: the archive's count, else the dump's estimate
	per   []int32 // chunks per table (a slice: a map of 100,000 tables was 4 MB)
	share int64   // one connection's share of all the chunks' bytes
	// whole holds the tables in several chunks loaded by one task in one
	// transaction, each with its chunks (indexes into the manifest's).
	whole map[int][]int
}

// layout sizes the chunks and chooses the tables loaded whole.
//
// A table in one chunk is one task anyway. A table in several chunks
// (ranges of ctids or keys) is one task when it holds at most one
// connection's share of all the data: the other connections have other
// tables to load meanwhile, so nothing waits for it. Its rows are then
// written once, frozen (TRUNCATE + COPY FREEZE in the task's
// transaction), where chunks loaded apart leave hint bits to set and pages
// to freeze to whoever reads them next: the index build, ANALYZE, and
// autovacuum, which vacuums the table again after each chunk's commit. Two
// connections loading one table also extend it one page at a time under
// its extension lock. At 12 GiB in 30 partitions, 50 MB chunks loaded
// apart on two connections cost 1.26x pg_restore's machine CPU. Larger
// tables keep their chunks apart, loaded on every connection at once.
//
// Not for a data-only restore (TRUNCATE would empty rows the table had),
// nor where an earlier run loaded some of the table's chunks (they commit
// apart), nor from a pipe, whose other streams would queue in spill files
// while one connection takes a table's chunks one after another.
func (d *dataStage) layout() layout {
	lay := layout{sizes: make([]int64, len(d.m.Chunks)), per: make([]int32, len(d.m.Tables)), whole: map[int][]int{}}
	for _, c := range d.m.Chunks {
		lay.per[c.Table]++
	}
	var total int64
	tableBytes := map[int]int64{} // tables in several chunks only
	for i, c := range d.m.Chunks {
		estimate := c.Size
		if estimate <= 0 {
			estimate = d.m.Tables[c.Table].SizeBytes / int64(lay.per[c.Table])
		}
		lay.sizes[i] = d.l.plannedBytes(c.Stream, estimate)
		total += lay.sizes[i]
		if lay.per[c.Table] > 1 {
			tableBytes[c.Table] += lay.sizes[i]
		}
	}
	lay.share = total / int64(max(d.opts.Jobs, 1))
	if d.sel.dataOnly || d.l.demuxed {
		return lay
	}
	for i, c := range d.m.Chunks {
		if size, ok := tableBytes[c.Table]; ok && size <= lay.share {
			lay.whole[c.Table] = append(lay.whole[c.Table], i)
		}
	}
	for t, all := range lay.whole {
		for _, k := range all {
			if d.target.j.IsDone(chunkStep(d.m.Chunks[k].Stream)) {
				delete(lay.whole, t)
				break
			}
		}
	}
	return lay
}

// freezeMinBytes is the smallest table loaded with TRUNCATE + COPY FREEZE.
// The TRUNCATE costs about a millisecond whatever the table's size (new
// heap, TOAST table and TOAST index files, the old ones unlinked at
// commit): 9.8 s of a 10,000-table restore. What FREEZE saves grows with
// the pages written: each page not written frozen is dirtied again later,
// once by the first reader setting hint bits and once by the vacuum that
// freezes it, some tens of microseconds a page. They break even around 16
// pages (128 KiB of data); below that the load is a plain COPY. Nothing
// else depends on the TRUNCATE: a load is one transaction, so an
// interrupted one leaves no rows, and the rows of an interrupted split
// load are emptied on resume (resetPartialTables).
const freezeMinBytes = 128 << 10

// freezes reports whether a table's only load, of size bytes, uses
// TRUNCATE + COPY FREEZE.
func freezes(size int64) bool { return size >= freezeMinBytes }

// fuseMaxBytes is the largest table whose indexes, constraints and ANALYZE
// run in its load's transaction (schedule.PostDataOptions.FuseBytes): for a small
// table they take less than the round trips and commits they would cost
// apart, and nothing is lost by not building them beside other work.
const fuseMaxBytes = 1 << 20

// skipDone tells the source which streams an earlier run loaded: this run
// will not read them.
func (d *dataStage) skipDone() {
	for _, c := range d.m.Chunks {
		if d.target.j.IsDone(chunkStep(c.Stream)) {
			d.skip(c.Stream)
		}
	}
	for _, lo := range d.m.LargeObjects {
		if d.target.j.IsDone(chunkStep(lo.Stream)) {
			d.skip(lo.Stream)
		}
	}
}

// setSequences restores every sequence's value as of the dump.
func (d *dataStage) setSequences(ctx context.Context) error {
	stmts := make([]targetStatement, len(d.m.Sequences))
	for i, s := range d.m.Sequences {
		name := pg.Qualified(s.Schema, s.Name)
		stmts[i] = targetStatement{"set sequence " + name,
			fmt.Sprintf("SELECT pg_catalog.setval(%s, %d, %t)", pg.Literal(name), s.LastValue, s.IsCalled)}
	}
	return d.target.execEach(ctx, stmts)
}

// resetPartialTables empties, on resume, every table loaded by one
// whole-table chunk that the journal does not list but that holds rows: an
// interrupted split load commits its parts one by one, so the rows of some
// parts may be in. Chunks that are ranges of a table are never split and
// load in one transaction each, so they never leave rows behind. (A chunk
// loaded with TRUNCATE + COPY FREEZE would wipe such rows itself, but
// whether a chunk is split depends on -j, which may differ between runs.)
func (d *dataStage) resetPartialTables(ctx context.Context) error {
	if d.target.resumed == 0 {
		return nil
	}
	conn, err := pg.Connect(ctx, d.target.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for i := range d.m.Chunks {
		c := &d.m.Chunks[i]
		if c.Where != "" || d.target.j.IsDone(chunkStep(c.Stream)) {
			continue
		}
		name := d.l.tableName(c)
		var any bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM ONLY "+name+")").Scan(&any); err != nil {
			return fmt.Errorf("resume: look into %s: %w", name, err)
		}
		if !any {
			continue
		}
		d.log.Info("resuming: emptying a partly loaded table", "table", name)
		_, err := conn.Exec(ctx, "TRUNCATE ONLY "+name)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // not the owner: no TRUNCATE privilege
			_, err = conn.Exec(ctx, "DELETE FROM ONLY "+name)
		}
		if err != nil {
			return fmt.Errorf("resume: empty partly loaded table %s: %w", name, err)
		}
	}
	return nil
}
