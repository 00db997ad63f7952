package subset

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Chosen is the computed subset: which tables keep all their rows, none, or
// the rows the rules chose, by row id in the snapshot it was computed in.
type Chosen struct {
	spec  Spec
	g     *graph
	cls   map[uint32]class
	kept  map[uint32][]tid // sorted, by leaf table
	whole bool             // --subset-others all
}

// Compute computes spec's subset on conn, which must be in the snapshot
// the rows will be read in (the dump's leader). It writes nothing: the
// kept rows are sets of row ids held here, grown by a fixed point (see
// closure). Its reads run in a savepoint rolled back at the end, which
// releases their locks; while they run, every table they read is locked
// and checked to be the snapshot's (a TRUNCATE committed after the
// snapshot would make a table read as empty in it, without an error).
//
// JIT compilation is off while it runs (the savepoint's rollback restores
// the setting): its queries are many and short, and a server compiles any
// whose estimated cost passes jit_above_cost, in each parallel worker. A
// walk's probe on fk-heavy spent 34 ms of its 87 compiling.
func Compute(ctx context.Context, conn *pgx.Conn, spec Spec, opts Options) (*Chosen, error) {
	q := "SAVEPOINT " + savepoint
	if opts.Server.HasJIT() {
		q += "; SET LOCAL jit = off"
	}
	if _, err := conn.Exec(ctx, q); err != nil {
		return nil, fmt.Errorf("subset: %w", pg.ExplainLost(err))
	}
	done, err := pg.LimitLockWait(ctx, conn, opts.LockWait)
	if err != nil {
		return nil, err
	}
	p, err := compute(ctx, conn, spec, opts)
	if err = done(err); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepoint+"; RELEASE SAVEPOINT "+savepoint); err != nil {
		return nil, fmt.Errorf("subset: release locks: %w", pg.ExplainLost(err))
	}
	return p, nil
}

func compute(ctx context.Context, conn *pgx.Conn, spec Spec, opts Options) (*Chosen, error) {
	g, err := readGraph(ctx, conn, opts.Server, spec.Refs)
	if err != nil {
		return nil, err
	}
	seeds := make([]uint32, len(spec.Seeds))
	for i, s := range spec.Seeds {
		if seeds[i], err = g.resolve(ctx, conn, s.Table); err != nil {
			return nil, fmt.Errorf("--subset: %w", err) // the table once: resolve names it
		}
	}
	p := &Chosen{spec: spec, g: g, cls: classify(g, seeds, spec.Children), kept: map[uint32][]tid{}, whole: spec.Others != OthersNone}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	c := &closure{conn: conn, log: log, g: g, kept: map[uint32]map[tid]struct{}{}, pending: map[uint32][]tid{}, batch: batchRows,
		followed: map[way]*rowSet{}, recurse: true, recursive: map[*edge]bool{}, index: map[*edge]bool{}, walks: map[*edge]int{}}
	if opts.Server.VersionNum < 140000 {
		c.batch, c.recurse = oldBatchRows, false
	}
	reached := func(oid uint32) bool { return p.cls[g.root(oid)] == reached }
	// The whole other tables whose rows reference reached ones are read
	// here too.
	var wholeEdges []*edge
	if p.whole {
		for _, e := range g.edges {
			if !reached(e.child) && reached(e.parent) {
				wholeEdges = append(wholeEdges, e)
			}
		}
	}
	warnWidened(opts.Logger, g, seeds, wholeEdges)
	if err := p.lock(ctx, conn, wholeEdges); err != nil {
		return nil, err
	}
	for i, s := range spec.Seeds {
		q := fmt.Sprintf("SELECT tableoid::pg_catalog.oid, ctid FROM %s WHERE (%s)", g.rels[seeds[i]].from(), s.Where)
		if _, err := c.queryRows(ctx, "--subset "+s.Table, q); err != nil {
			return nil, err
		}
	}
	if spec.Children {
		// Downward from the seeds only: a row kept because something
		// references it does not bring its own children.
		if err := c.downward(ctx); err != nil {
			return nil, err
		}
		for _, leaf := range slices.Sorted(maps.Keys(c.kept)) {
			rows := slices.Collect(maps.Keys(c.kept[leaf]))
			slices.Sort(rows)
			c.pending[leaf] = rows
			c.order = append(c.order, leaf)
		}
	}
	for _, e := range wholeEdges {
		if _, err := c.up(ctx, e, 0, nil); err != nil {
			return nil, err
		}
	}
	// Upward from every kept row, to the fixed point: each row is
	// followed once, so cycles end. A self reference's rows wait until
	// nothing else is pending, so that one recursive query walks the
	// chains of all of them: started from each wave of new rows, the
	// walks would cross the same rows again (fk-heavy's fk_t01, a chain
	// through 200,000 rows, was walked twice).
	selfWait := map[*edge]map[uint32][]tid{}
	for {
		for leaf, rows, ok := c.next(); ok; leaf, rows, ok = c.next() {
			for _, h := range g.holders(leaf) {
				for _, e := range g.edges {
					switch {
					case e.child != h || !reached(e.parent):
					case e.self():
						if selfWait[e] == nil {
							selfWait[e] = map[uint32][]tid{}
						}
						selfWait[e][leaf] = append(selfWait[e][leaf], rows...)
					default:
						if err := c.followUp(ctx, e, leaf, rows); err != nil {
							return nil, err
						}
					}
				}
			}
		}
		if len(selfWait) == 0 {
			break
		}
		for _, e := range g.edges {
			for _, leaf := range slices.Sorted(maps.Keys(selfWait[e])) {
				for rows := selfWait[e][leaf]; len(rows) > 0; {
					n := min(len(rows), c.batch)
					if err := c.followUp(ctx, e, leaf, rows[:n]); err != nil {
						return nil, err
					}
					rows = rows[n:]
				}
			}
		}
		clear(selfWait)
	}
	kept := 0
	for leaf, set := range c.kept {
		rows := slices.Collect(maps.Keys(set))
		slices.Sort(rows)
		p.kept[leaf] = rows
		kept += len(rows)
	}
	log.Debug("subset closure", "queries", c.queries, "rows", kept, "duration", time.Since(start).Round(time.Millisecond))
	return p, nil
}

// warnWidened warns about each whole other table that references a seed
// table: its rows bring every seed row they reference (rule 4), which is
// seldom what the user meant (an order's lines without
// --subset-children keep every order).
func warnWidened(log *slog.Logger, g *graph, seeds []uint32, wholeEdges []*edge) {
	if log == nil {
		return
	}
	seedRoots := map[uint32]bool{}
	for _, s := range seeds {
		seedRoots[g.root(s)] = true
	}
	seen := map[[2]uint32]bool{}
	for _, e := range wholeEdges {
		child, parent := g.root(e.child), g.root(e.parent)
		if !seedRoots[parent] || seen[[2]uint32{child, parent}] {
			continue
		}
		seen[[2]uint32{child, parent}] = true
		log.Warn(fmt.Sprintf("%s references %s but no rule reaches it: it keeps all its rows (--subset-others all) and with them every row of %s they reference; --subset-children or --subset-others none keeps %s to its condition",
			g.rels[child].qualified(), g.rels[parent].qualified(), g.rels[parent].qualified(), g.rels[parent].qualified()))
	}
}

// lock locks every table the closure reads (the reached partition trees'
// tables, and the whole other tables of edges) and checks that each is
// still the snapshot's: same name, same storage.
func (p *Chosen) lock(ctx context.Context, conn *pgx.Conn, wholeEdges []*edge) error {
	set := map[uint32]bool{}
	for oid, r := range p.g.rels {
		if !r.partitioned && p.cls[p.g.root(oid)] == reached {
			set[oid] = true
		}
	}
	for _, e := range wholeEdges {
		for _, l := range p.g.rels[e.child].leaves {
			set[l] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	oids := slices.Sorted(maps.Keys(set))
	names := make([]string, len(oids))
	for i, oid := range oids {
		names[i] = p.g.rels[oid].qualified()
	}
	if _, err := conn.Exec(ctx, "LOCK TABLE "+strings.Join(names, ", ")+" IN ACCESS SHARE MODE"); err != nil {
		return fmt.Errorf("subset: lock tables: %w", pg.ExplainLost(err))
	}
	var changed []string
	err := conn.QueryRow(ctx, `
SELECT ARRAY(SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
  WHERE c.oid = ANY ($1::pg_catalog.oid[])
    AND (pg_catalog.pg_relation_filenode(c.oid) IS DISTINCT FROM c.relfilenode
         OR pg_catalog.to_regclass(pg_catalog.format('%I.%I', n.nspname, c.relname)) IS DISTINCT FROM c.oid))`, oids).Scan(&changed)
	if err != nil {
		return fmt.Errorf("subset: check tables: %w", pg.ExplainLost(err))
	}
	if len(changed) > 0 {
		return fmt.Errorf("subset: table %s was truncated, rewritten, dropped or renamed by another session after the snapshot was taken: stopped rather than choose rows from a table that reads as changed; run again", changed[0])
	}
	return nil
}

// keepRows is the most row ids one chunk's Keep names: about 12 bytes of
// SQL each, so a statement of about 0.6 MB, read by one TID scan.
const keepRows = 50000

// Apply narrows the dump's plan to the subset: each table the rules reach
// gets chunks reading its kept rows by row id (none at all: one chunk
// reading nothing), an other table keeps its planned chunks (all its rows)
// or reads nothing (--subset-others none). tables and chunks are the
// dump's catalog, chunks[i] table i's; rowBytes of a table is its average
// row size, for the chunks' estimated sizes. Apply returns what the
// archive records.
func (p *Chosen) Apply(tables []pg.TableInfo, chunks [][]chunk.Chunk) *archive.Subset {
	rec := p.spec.Record()
	for i, t := range tables {
		r := p.g.rels[t.OID]
		if r == nil {
			continue
		}
		if p.cls[p.g.root(t.OID)] != reached {
			if p.whole {
				continue
			}
			chunks[i] = []chunk.Chunk{{Where: t.Where, Keep: "false"}}
			rec.Tables = append(rec.Tables, archive.SubsetTable{Schema: t.Schema, Name: t.Name, Empty: true})
			continue
		}
		rows := p.kept[t.OID]
		rec.Tables = append(rec.Tables, archive.SubsetTable{Schema: t.Schema, Name: t.Name, Rows: int64(len(rows))})
		rowBytes := int64(0)
		if t.Rows > 0 {
			rowBytes = t.SizeBytes / max(int64(t.Rows), 1)
		}
		chunks[i] = keepChunks(rows, t.Where, rowBytes)
	}
	return rec
}

// keepChunks cuts rows (sorted) into chunks of at most about keepRows row
// ids, at block boundaries: each chunk's Where is its page range (as a
// split table's chunks), which restore treats as one part of a table;
// its Keep names its rows.
func keepChunks(rows []tid, where string, rowBytes int64) []chunk.Chunk {
	if len(rows) == 0 {
		return []chunk.Chunk{{Where: where, Keep: "false"}}
	}
	var parts [][]tid
	for len(rows) > 0 {
		n := min(len(rows), keepRows)
		for n < len(rows) && rows[n].block() == rows[n-1].block() {
			n++
		}
		parts = append(parts, rows[:n])
		rows = rows[n:]
	}
	out := make([]chunk.Chunk, len(parts))
	for i, part := range parts {
		c := chunk.Chunk{Where: where, Keep: keepSQL(part), Size: int64(len(part)) * rowBytes}
		if len(parts) > 1 {
			var bounds []string
			if i > 0 {
				bounds = append(bounds, fmt.Sprintf("ctid >= '(%d,0)'", part[0].block()))
			}
			if i < len(parts)-1 {
				bounds = append(bounds, fmt.Sprintf("ctid < '(%d,0)'", parts[i+1][0].block()))
			}
			r := strings.Join(bounds, " AND ")
			if where != "" {
				r = "(" + where + ") AND " + r
			}
			c.Where = r
		}
		out[i] = c
	}
	return out
}

// keepSQL is the predicate that reads rows by row id: a TID scan.
func keepSQL(rows []tid) string {
	var b strings.Builder
	b.Grow(len(rows)*14 + 48)
	b.WriteString(`ctid = ANY ('{`)
	for i, t := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"(`)
		b.WriteString(strconv.FormatUint(uint64(t.block()), 10))
		b.WriteByte(',')
		b.WriteString(strconv.FormatUint(uint64(uint16(t)), 10))
		b.WriteString(`)"`)
	}
	b.WriteString(`}'::pg_catalog.tid[])`)
	return b.String()
}
