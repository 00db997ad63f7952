package subset

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// batchRows is the most frontier rows of one table one join reads: the
// ctid array of a query (about 10 bytes a row id as sent, so at most
// about 10 MB). A join along a reference whose child columns have no index
// scans the child table whole, whatever the batch: so the batch is large
// enough that all the rows a table gets in one step are followed at once
// (one scan per reference in the usual case: the 100,000 accounts of
// pgbench s100's 1% follow their history in one scan, not ten), and
// bounded so that one query's memory, the client's and the server's,
// stays small beside the kept sets.
//
// A large array needs its page range beside it (rowsIn): the planner
// costs a TID scan as one random page read per row id, so past a few
// thousand ids it would rather read the whole table; with the range it
// reads only the pages from the first id to the last (a TID range scan,
// PostgreSQL 14+). Before 14 there is no TID range scan, and the batch
// stays at oldBatchRows, where the TID scan still wins.
const (
	batchRows    = 1_000_000
	oldBatchRows = 10_000
)

// savepoint brackets Compute's reads: rolled back at the end, it releases
// the locks they took, as the dump's catalog reads do.
const savepoint = "pgsprint_subset"

// Options are what Compute needs besides the spec.
type Options struct {
	Server pg.Server
	// LockWait is --lock-wait-timeout: how long to wait for a table's
	// lock ("" waits as long as it takes).
	LockWait string
	// Logger hears the warnings (nil: none).
	Logger *slog.Logger
}

// tid is a row id, block<<16 | offset, in one table of the snapshot.
type tid uint64

func tidOf(t pgtype.TID) tid { return tid(uint64(t.BlockNumber)<<16 | uint64(t.OffsetNumber)) }

func (t tid) pg() pgtype.TID {
	return pgtype.TID{BlockNumber: uint32(t >> 16), OffsetNumber: uint16(t), Valid: true}
}

func (t tid) block() uint32 { return uint32(t >> 16) }

// class is what a table of the graph keeps, by its partition tree.
type class int

const (
	other   class = iota // reached by no rule: all or none of its rows, by --subset-others
	reached              // a seed, a child (--subset-children) or a parent of one: the rows the rules chose
)

// closure is the fixed point's state: the rows kept so far, per table
// holding rows, those not yet followed, and those known not to need
// following along an edge (followed).
type closure struct {
	conn    *pgx.Conn
	log     *slog.Logger // hears each query at Debug level
	queries int          // run so far, for the summary
	g       *graph
	classOf map[uint32]class // by partition root
	whole   map[uint32]bool  // by root: an other table kept whole (--subset-others all)
	kept    map[uint32]map[tid]struct{}
	pending map[uint32][]tid
	order   []uint32 // leaves with pending rows, first come first followed
	batch   int      // the most rows next takes: batchRows, or oldBatchRows before PostgreSQL 14
	// followed are, per edge, direction and leaf, the rows whose
	// neighbours that way along the edge are known to be kept already
	// (see skip).
	followed map[way]*rowSet
}

// way is an edge, followed up (to parents) or down (to children), from
// the rows of one leaf table.
type way struct {
	e    *edge
	up   bool
	leaf uint32
}

// rowSet is a set of row ids of one table at 8 bytes each (a third of
// a map's): appended to, sorted when read.
type rowSet struct {
	rows   []tid
	sorted bool
}

// without is rows less those in s.
func (s *rowSet) without(rows []tid) []tid {
	if s == nil || len(s.rows) == 0 {
		return rows
	}
	if !s.sorted {
		slices.Sort(s.rows)
		s.rows = slices.Compact(s.rows)
		s.sorted = true
	}
	var out []tid
	for _, t := range rows {
		if _, ok := slices.BinarySearch(s.rows, t); !ok {
			out = append(out, t)
		}
	}
	return out
}

// skip records that the rows got (by leaf) need not be followed along e,
// up or down, any more: their neighbours that way are kept already.
//
// Why that holds, up: a row a join down along a declared foreign key e
// returned references a row that was kept then (the join started from
// it), and the parent columns of a foreign key are a unique key, so that
// row is its only parent along e; kept rows stay kept, so following e up
// from it would find nothing new. Not so along a virtual reference
// (--subset-ref), whose parent columns need not be unique: a row may
// match other parent rows than the one it came down from. So the
// closure is the same, only the joins that would add nothing are left
// out: at pgbench s100, every history row came down along all three of
// its foreign keys and every account along its one, and the upward step
// runs no query at all.
func (c *closure) skip(e *edge, up bool, got map[uint32][]tid) {
	for leaf, rows := range got {
		k := way{e, up, leaf}
		s := c.followed[k]
		if s == nil {
			s = &rowSet{}
			c.followed[k] = s
		}
		s.rows = append(s.rows, rows...)
		s.sorted = false
	}
}

// toFollow is rows of leaf less those skip recorded for e that way.
func (c *closure) toFollow(e *edge, up bool, leaf uint32, rows []tid) []tid {
	return c.followed[way{e, up, leaf}].without(rows)
}

// add keeps rows of leaf, and queues those not kept before: it returns
// how many.
func (c *closure) add(leaf uint32, rows []tid) int {
	set := c.kept[leaf]
	if set == nil {
		set = map[tid]struct{}{}
		c.kept[leaf] = set
	}
	fresh := 0
	for _, t := range rows {
		if _, ok := set[t]; ok {
			continue
		}
		set[t] = struct{}{}
		if len(c.pending[leaf]) == 0 && fresh == 0 {
			c.order = append(c.order, leaf)
		}
		fresh++
		c.pending[leaf] = append(c.pending[leaf], t)
	}
	return fresh
}

// next takes up to c.batch pending rows of one leaf.
func (c *closure) next() (uint32, []tid, bool) {
	for len(c.order) > 0 {
		leaf := c.order[0]
		rows := c.pending[leaf]
		if len(rows) == 0 {
			c.order = c.order[1:]
			continue
		}
		n := min(len(rows), c.batch)
		batch := slices.Clone(rows[:n])
		c.pending[leaf] = rows[n:]
		if len(c.pending[leaf]) == 0 {
			delete(c.pending, leaf)
			c.order = c.order[1:]
		}
		return leaf, batch, true
	}
	return 0, nil, false
}

// queryRows runs q and keeps the (tableoid, ctid) rows it returns; it
// returns them by leaf table.
func (c *closure) queryRows(ctx context.Context, what, q string, args ...any) (map[uint32][]tid, error) {
	start := time.Now()
	c.queries++
	// The statement's description is cached, its plan is not: each run is
	// planned with its own row ids (an unnamed statement), as the size of
	// the array decides between a nested loop and a hash join, where a
	// prepared statement's generic plan would guess 10 rows.
	rows, err := c.conn.Query(ctx, q, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	got := map[uint32][]tid{}
	var oid uint32
	var t pgtype.TID
	n := 0
	if _, err := pgx.ForEachRow(rows, []any{&oid, &t}, func() error {
		got[oid] = append(got[oid], tidOf(t))
		n++
		return nil
	}); err != nil {
		return nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	fresh := 0
	for _, leaf := range slices.Sorted(maps.Keys(got)) {
		fresh += c.add(leaf, got[leaf])
	}
	c.log.Debug("subset query", "what", what, "args", argRows(args), "rows", n, "new", fresh, "duration", time.Since(start).Round(time.Millisecond))
	return got, nil
}

// join is the condition that matches e's child rows (alias c) to their
// parent rows (alias p).
func (e *edge) join() string {
	parts := make([]string, len(e.childCols))
	for i := range e.childCols {
		parts[i] = fmt.Sprintf("p.%s %s c.%s", pgx.Identifier{e.parentCols[i]}.Sanitize(), e.ops[i], pgx.Identifier{e.childCols[i]}.Sanitize())
	}
	return strings.Join(parts, " AND ")
}

// followUp keeps the parents along e of leaf's rows (leaf holds e's
// child rows) but those skip recorded.
func (c *closure) followUp(ctx context.Context, e *edge, leaf uint32, rows []tid) error {
	if rows = c.toFollow(e, true, leaf, rows); len(rows) == 0 {
		return nil
	}
	_, err := c.up(ctx, e, leaf, rows)
	return err
}

// followDown keeps the rows that reference leaf's rows along e (leaf
// holds e's parent rows), and records that their parents along e are
// kept (skip).
func (c *closure) followDown(ctx context.Context, e *edge, leaf uint32, rows []tid) error {
	got, err := c.down(ctx, e, leaf, rows)
	if err == nil && e.declared {
		c.skip(e, true, got)
	}
	return err
}

// up keeps the parents of leaf's rows along e (leaf holds e's child rows),
// or of every row of e's child relation when rows is nil.
func (c *closure) up(ctx context.Context, e *edge, leaf uint32, rows []tid) (map[uint32][]tid, error) {
	parent := c.g.rels[e.parent]
	if rows == nil {
		q := fmt.Sprintf("SELECT DISTINCT p.tableoid::pg_catalog.oid, p.ctid FROM %s c JOIN %s p ON %s", c.g.rels[e.child].from(), parent.from(), e.join())
		return c.queryRows(ctx, "follow "+e.name, q)
	}
	q := fmt.Sprintf("SELECT DISTINCT p.tableoid::pg_catalog.oid, p.ctid FROM ONLY %s c JOIN %s p ON %s WHERE %s",
		c.g.rels[leaf].qualified(), parent.from(), e.join(), rowsIn("c"))
	return c.queryRows(ctx, "follow "+e.name, q, tidArgs(rows)...)
}

// down keeps the rows that reference leaf's rows along e (leaf holds e's
// parent rows).
func (c *closure) down(ctx context.Context, e *edge, leaf uint32, rows []tid) (map[uint32][]tid, error) {
	q := fmt.Sprintf("SELECT DISTINCT c.tableoid::pg_catalog.oid, c.ctid FROM ONLY %s p JOIN %s c ON %s WHERE %s",
		c.g.rels[leaf].qualified(), c.g.rels[e.child].from(), e.join(), rowsIn("p"))
	return c.queryRows(ctx, "follow "+e.name+" to its children", q, tidArgs(rows)...)
}

// argRows is how many row ids a query's arguments name, for its log line.
func argRows(args []any) int {
	n := 0
	for _, a := range args {
		if t, ok := a.([]pgtype.TID); ok {
			n += len(t)
		}
	}
	return n
}

// rowsIn is the condition that picks alias a's rows by the row ids of
// tidArgs: the ids, and their page range for the planner (see batchRows).
func rowsIn(a string) string {
	return fmt.Sprintf("%[1]s.ctid = ANY ($1::pg_catalog.tid[]) AND %[1]s.ctid >= $2::pg_catalog.tid AND %[1]s.ctid <= $3::pg_catalog.tid", a)
}

// tidArgs are rowsIn's arguments for rows (at least one).
func tidArgs(rows []tid) []any {
	out := make([]pgtype.TID, len(rows))
	lo, hi := rows[0], rows[0]
	for i, t := range rows {
		out[i] = t.pg()
		lo, hi = min(lo, t), max(hi, t)
	}
	return []any{out, lo.pg(), hi.pg()}
}

// classify says which partition trees the rules reach: the seeds', those
// reached downward from them with children, and every one reached upward
// from those. The rest are other tables.
func classify(g *graph, seeds []uint32, children bool) map[uint32]class {
	cls := map[uint32]class{}
	var frontier []uint32
	visit := func(root uint32) {
		if cls[root] != reached {
			cls[root] = reached
			frontier = append(frontier, root)
		}
	}
	for _, s := range seeds {
		visit(g.root(s))
	}
	if children {
		for len(frontier) > 0 {
			r := frontier[0]
			frontier = frontier[1:]
			for _, e := range g.edges {
				if g.root(e.parent) == r {
					visit(g.root(e.child))
				}
			}
		}
		for r, c := range cls {
			if c == reached {
				frontier = append(frontier, r)
			}
		}
		slices.Sort(frontier)
	}
	for len(frontier) > 0 {
		r := frontier[0]
		frontier = frontier[1:]
		for _, e := range g.edges {
			if g.root(e.child) == r {
				visit(g.root(e.parent))
			}
		}
	}
	return cls
}
