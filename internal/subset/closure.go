package subset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// smallParents is the most parent rows down follows by a filter on the
// child's column (a one-column reference) when no index starts with that
// column: the filter compares each child row with every parent key, which
// beats a hash join's probe for a few keys only (one tenant, one branch:
// 1.0 s against 1.26 s for pgbench s100's accounts, read in parallel).
// With such an index, any number of parent rows take the filter, as
// index probes.
const smallParents = 16

// keyedParents is the most child rows up follows to their parents by the
// parent key's index, one probe per distinct key, rather than by a join
// the planner chooses: past it, a hash join over a scan of the parent
// may cost less than the probes.
const keyedParents = 20000

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
	// recurse says whether self references are followed by recursive
	// queries (PostgreSQL 14+), recursive which of them the server
	// accepted (absent: not tried yet): see selfQuery.
	recurse   bool
	recursive map[*edge]bool
	walks     map[*edge]int  // the planner's row count of each self reference's table walk may follow, -1 where it may not (walkable)
	index     map[*edge]bool // whether an index starts with the edge's child columns (see indexed)
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
// match other parent rows than the one it came down from. A recursive
// query along a self reference (selfQuery) follows every row it returns,
// that way, whatever the reference. So the closure is the same, only the
// joins that would add nothing are left out: at pgbench s100, every
// history row came down along all three of its foreign keys and every
// account along its one, and the upward step runs no query at all.
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
	if len(rows) > len(set) {
		// Room for them all at once: growing a map by doubling moves
		// every row again at each step (a walk adds 200,000 at once).
		grown := make(map[tid]struct{}, len(set)+len(rows))
		for t := range set {
			grown[t] = struct{}{}
		}
		set = grown
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
	got, _, err := c.queryFlagged(ctx, what, q, 0, args...)
	return got, err
}

// queryFlagged is queryRows for a query whose rows have flags more
// booleans after the row id: it returns too, for each flag, the rows
// that had it, by leaf table.
func (c *closure) queryFlagged(ctx context.Context, what, q string, flags int, args ...any) (map[uint32][]tid, []map[uint32][]tid, error) {
	start := time.Now()
	c.queries++
	// The statement's description is cached, its plan is not: each run is
	// planned with its own row ids (an unnamed statement), as the size of
	// the array decides between a nested loop and a hash join, where a
	// prepared statement's generic plan would guess 10 rows.
	rows, err := c.conn.Query(ctx, q, append([]any{pgx.QueryExecModeCacheDescribe}, args...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	got := map[uint32][]tid{}
	byFlag := make([]map[uint32][]tid, flags)
	for i := range byFlag {
		byFlag[i] = map[uint32][]tid{}
	}
	var oid uint32
	var t pgtype.TID
	dest := []any{&oid, &t}
	flag := make([]bool, flags)
	for i := range flag {
		dest = append(dest, &flag[i])
	}
	n := 0
	if _, err := pgx.ForEachRow(rows, dest, func() error {
		got[oid] = append(got[oid], tidOf(t))
		for i, f := range flag {
			if f {
				byFlag[i][oid] = append(byFlag[i][oid], tidOf(t))
			}
		}
		n++
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	fresh := 0
	for _, leaf := range slices.Sorted(maps.Keys(got)) {
		fresh += c.add(leaf, got[leaf])
	}
	c.log.Debug("subset query", "what", what, "args", argRows(args), "rows", n, "new", fresh, "duration", time.Since(start).Round(time.Millisecond))
	return got, byFlag, nil
}

// join is the condition that matches e's child rows (alias c) to their
// parent rows (alias p).
func (e *edge) join() string { return e.on("p", e.parentCols, "c", e.childCols) }

// on is join with other relations and columns on either side: a
// recursive query's working table (see selfQuery) or a set of parent keys
// (see downMany) in place of p or c.
func (e *edge) on(p string, parentCols []string, c string, childCols []string) string {
	parts := make([]string, len(childCols))
	for i := range childCols {
		parts[i] = fmt.Sprintf("%s.%s %s %s.%s", p, pgx.Identifier{parentCols[i]}.Sanitize(), e.ops[i], c, pgx.Identifier{childCols[i]}.Sanitize())
	}
	return strings.Join(parts, " AND ")
}

// self says whether e references its own table (a partition tree's, when
// declared on its top): an employee's manager, a reply's message.
func (e *edge) self() bool { return e.child == e.parent }

// followUp keeps the parents along e of leaf's rows (leaf holds e's
// child rows) but those skip recorded.
func (c *closure) followUp(ctx context.Context, e *edge, leaf uint32, rows []tid) error {
	if rows = c.toFollow(e, true, leaf, rows); len(rows) == 0 {
		return nil
	}
	if e.self() {
		got, ok, err := c.selfQuery(ctx, e, true, leaf, rows)
		if ok || err != nil {
			c.skip(e, true, got)
			return err
		}
	}
	_, err := c.up(ctx, e, leaf, rows)
	return err
}

// followDown keeps the rows that reference leaf's rows along e (leaf
// holds e's parent rows), and records that their parents along e are
// kept (skip).
func (c *closure) followDown(ctx context.Context, e *edge, leaf uint32, rows []tid) error {
	if rows = c.toFollow(e, false, leaf, rows); len(rows) == 0 {
		return nil
	}
	var got map[uint32][]tid
	ok, err := false, error(nil)
	if e.self() {
		if got, ok, err = c.selfQuery(ctx, e, false, leaf, rows); ok {
			c.skip(e, false, got)
		}
	}
	if !ok && err == nil {
		got, err = c.down(ctx, e, leaf, rows)
	}
	if err == nil && e.declared {
		c.skip(e, true, got)
	}
	return err
}

// recursiveSavepoint brackets the first recursive query along each self
// reference, which the server may refuse (see selfQuery).
const recursiveSavepoint = "pgsprint_subset_recursive"

// selfQuery keeps the rows along self reference e from leaf's rows, up
// (their parents, their parents' parents, ...) or down (their children,
// ...), to the end of the chain, in one recursive query: the fixed point
// would take one query per link (a 150,000-row chain, 150,000 queries).
// It returns the rows it reached, every one followed that way (skip): its
// working table holds them with their key columns, and UNION drops a row
// seen before, so a cycle ends. ok is false when the server cannot run it:
// before PostgreSQL 14 (no hashing of row ids), or when a key column's
// type has no hashing (bit, money, tsvector...: "could not implement
// recursive UNION", learnt on the edge's first query, in a savepoint).
// The caller then takes one step of the fixed point.
func (c *closure) selfQuery(ctx context.Context, e *edge, up bool, leaf uint32, rows []tid) (got map[uint32][]tid, ok bool, err error) {
	if works, tried := c.recursive[e]; !c.recurse || tried && !works {
		return nil, false, nil
	}
	// The working table's columns: the row id, and the columns the next
	// step joins on (up: the child columns, whose parent it looks for;
	// down: the parent columns).
	carried, step := e.childCols, "follow "+e.name+" to the end of its chain"
	if !up {
		carried, step = e.parentCols, "follow "+e.name+" to its children, to the end of its chain"
	}
	keys := make([]string, len(carried))
	sel := make([]string, len(carried))
	near := "p" // the alias of the rows each step reaches
	if !up {
		near = "c"
	}
	for i, col := range carried {
		keys[i] = fmt.Sprintf("k%d", i+1)
		sel[i] = near + "." + pgx.Identifier{col}.Sanitize()
	}
	from := c.g.rels[e.child].from()
	var first, next string
	if up {
		first = fmt.Sprintf("FROM ONLY %s c JOIN %s p ON %s WHERE %s", c.g.rels[leaf].qualified(), from, e.join(), rowsIn("c"))
		next = fmt.Sprintf("FROM r c JOIN %s p ON %s", from, e.on("p", e.parentCols, "c", keys))
	} else {
		first = fmt.Sprintf("FROM ONLY %s p JOIN %s c ON %s WHERE %s", c.g.rels[leaf].qualified(), from, e.join(), rowsIn("p"))
		next = fmt.Sprintf("FROM r p JOIN %s c ON %s", from, e.on("p", keys, "c", e.childCols))
	}
	cols := fmt.Sprintf("%[1]s.tableoid::pg_catalog.oid, %[1]s.ctid, %[2]s", near, strings.Join(sel, ", "))
	q := fmt.Sprintf("WITH RECURSIVE r(o, t, %s) AS (SELECT %s %s UNION SELECT %s %s) SELECT o, t FROM r",
		strings.Join(keys, ", "), cols, first, cols, next)
	// Each step of the walk joins the few rows the last one reached to
	// the table: by an index, where one serves (up a foreign key: the
	// referenced key's; down: one on the child columns), the planner
	// must not choose a hash join, which reads the whole table at every
	// step. It costs the working table by the first step's estimate, and
	// switched to a hash join for 1,400 starting rows spread over
	// fk-heavy's fk_t01, a chain 200,000 steps long: hours. So the query
	// runs with hash and merge joins off, in a savepoint whose rollback
	// (the query writes nothing) restores them.
	byIndex := up && e.declared
	if !up {
		if byIndex, err = c.indexed(ctx, e); err != nil {
			return nil, false, err
		}
	}
	set := ""
	if byIndex {
		set = "; SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off"
	}
	if _, err := c.conn.Exec(ctx, "SAVEPOINT "+recursiveSavepoint+set); err != nil {
		return nil, false, fmt.Errorf("subset: %w", pg.ExplainLost(err))
	}
	walk, err := c.walkable(ctx, e, leaf)
	if err == nil && walk {
		if walk, err = c.longWalk(ctx, q, rows); err == nil && walk {
			if got, err = c.walk(ctx, e, up, leaf, rows, step); err != nil {
				return nil, false, err
			}
			if _, err := c.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+recursiveSavepoint+"; RELEASE SAVEPOINT "+recursiveSavepoint); err != nil {
				return nil, false, fmt.Errorf("subset: %w", pg.ExplainLost(err))
			}
			return got, true, nil
		}
	}
	if err == nil {
		got, err = c.queryRows(ctx, step, q, tidArgs(rows)...)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "0A000" { // feature_not_supported
		c.log.Debug("subset: no recursive query along a self reference: the fixed point follows it", "reference", e.name, "reason", pgErr.Message+": "+pgErr.Detail)
		c.recursive[e] = false
		if _, err := c.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+recursiveSavepoint+"; RELEASE SAVEPOINT "+recursiveSavepoint); err != nil {
			return nil, false, fmt.Errorf("subset: %w", pg.ExplainLost(err))
		}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	c.recursive[e] = true
	if _, err := c.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+recursiveSavepoint+"; RELEASE SAVEPOINT "+recursiveSavepoint); err != nil {
		return nil, false, fmt.Errorf("subset: %w", pg.ExplainLost(err))
	}
	return got, true, nil
}

// up keeps the parents of leaf's rows along e (leaf holds e's child rows),
// or of every row of e's child relation when rows is nil.
func (c *closure) up(ctx context.Context, e *edge, leaf uint32, rows []tid) (map[uint32][]tid, error) {
	parent := c.g.rels[e.parent]
	if rows == nil {
		q := fmt.Sprintf("SELECT DISTINCT p.tableoid::pg_catalog.oid, p.ctid FROM %s c JOIN %s p ON %s", c.g.rels[e.child].from(), parent.from(), e.join())
		return c.queryRows(ctx, "follow "+e.name, q)
	}
	if e.declared && len(e.parentCols) == 1 && len(rows) <= keyedParents {
		// The parents by their key, an index's (a foreign key's parent
		// columns are a unique key): each parent once, without the
		// DISTINCT the join needs. The planner, costing each probe of a
		// join as a random read, chose a hash join over a whole parallel
		// scan of the parent for fk-heavy's 1,397 rows (44-66 ms, against
		// a few).
		q := fmt.Sprintf("SELECT p.tableoid::pg_catalog.oid, p.ctid FROM %s p WHERE p.%s %s ANY (ARRAY(SELECT c.%s FROM ONLY %s c WHERE %s))",
			parent.from(), pgx.Identifier{e.parentCols[0]}.Sanitize(), e.ops[0], pgx.Identifier{e.childCols[0]}.Sanitize(),
			c.g.rels[leaf].qualified(), rowsIn("c"))
		return c.queryRows(ctx, "follow "+e.name+" by its keys", q, tidArgs(rows)...)
	}
	q := fmt.Sprintf("SELECT DISTINCT p.tableoid::pg_catalog.oid, p.ctid FROM ONLY %s c JOIN %s p ON %s WHERE %s",
		c.g.rels[leaf].qualified(), parent.from(), e.join(), rowsIn("c"))
	return c.queryRows(ctx, "follow "+e.name, q, tidArgs(rows)...)
}

// down keeps the rows that reference leaf's rows along e (leaf holds e's
// parent rows). Along a foreign key each child row matches one parent row
// at most (a unique key), and the ids are distinct rows: no row comes
// twice, and DISTINCT (a hash of every row returned) is left out; a
// virtual reference's parent columns may repeat a value, and keep it.
func (c *closure) down(ctx context.Context, e *edge, leaf uint32, rows []tid) (map[uint32][]tid, error) {
	filter := len(e.childCols) == 1 && e.rops[0] != ""
	if filter && len(rows) > smallParents {
		var err error
		if filter, err = c.indexed(ctx, e); err != nil {
			return nil, err
		}
	}
	if filter {
		// A filter on the child's column alone, against the parent keys
		// (an InitPlan): a scan of the child evaluates one comparison
		// per row where a hash join probes a hash, which wins for a few
		// keys; an index on the column is probed once per key, where
		// the planner, costing each probe as a random read, would
		// rather hash-join a whole scan of the child past a few
		// thousand (fk-heavy's 200,000-row tables: 50-230 ms a step).
		// The same rows, each once, as the join's.
		q := fmt.Sprintf("SELECT c.tableoid::pg_catalog.oid, c.ctid FROM %s c WHERE c.%s %s ANY (ARRAY(SELECT p.%s FROM ONLY %s p WHERE %s))",
			c.g.rels[e.child].from(), pgx.Identifier{e.childCols[0]}.Sanitize(), e.rops[0], pgx.Identifier{e.parentCols[0]}.Sanitize(),
			c.g.rels[leaf].qualified(), rowsIn("p"))
		return c.queryRows(ctx, "follow "+e.name+" to its children by their parents' keys", q, tidArgs(rows)...)
	}
	distinct := "DISTINCT "
	if e.declared {
		distinct = ""
	}
	q := fmt.Sprintf("SELECT %sc.tableoid::pg_catalog.oid, c.ctid FROM ONLY %s p JOIN %s c ON %s WHERE %s",
		distinct, c.g.rels[leaf].qualified(), c.g.rels[e.child].from(), e.join(), rowsIn("p"))
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
func rowsIn(a string) string { return rowsInAt(a, 1) }

// rowsInAt is rowsIn with its arguments from $n on.
func rowsInAt(a string, n int) string {
	return fmt.Sprintf("%[1]s.ctid = ANY ($%[2]d::pg_catalog.tid[]) AND %[1]s.ctid >= $%[3]d::pg_catalog.tid AND %[1]s.ctid <= $%[4]d::pg_catalog.tid", a, n, n+1, n+2)
}

// sparseRows is the most row ids a query reads by a TID scan, one page
// per id, rather than by their page range (tidArgs); past it the planner
// would read the whole table instead of either.
const sparseRows = 5000

// tidArgs are rowsIn's arguments for rows (at least one). The range is
// the rows' own where they are dense (a quarter or more of the rows of
// the pages they span, judged by the highest line pointer among them), so
// that a TID range scan reads little else. Where a few thousand are
// spread thin, it is every row id, so that the planner reads just them by
// a TID scan: the range would have it read every row between
// (fk-heavy's 3,485 rows spread over 3,930 pages: 424,000 rows read, 111
// ms, against a few ms).
func tidArgs(rows []tid) []any {
	out := make([]pgtype.TID, len(rows))
	lo, hi := rows[0], rows[0]
	perPage := uint16(1)
	for i, t := range rows {
		out[i] = t.pg()
		lo, hi = min(lo, t), max(hi, t)
		perPage = max(perPage, uint16(t))
	}
	span := uint64(hi.block()-lo.block()) + 1
	if len(rows) <= sparseRows && uint64(len(rows))*4 < span*uint64(perPage) {
		lo, hi = tid(0), tid(math.MaxUint32<<16|math.MaxUint16)
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
	// walk visits, until the frontier is empty, the far end of every edge
	// whose near end is on it (downward: parent to child).
	walk := func(downward bool) {
		for len(frontier) > 0 {
			r := frontier[0]
			frontier = frontier[1:]
			for _, e := range g.edges {
				near, far := e.child, e.parent
				if downward {
					near, far = far, near
				}
				if g.root(near) == r {
					visit(g.root(far))
				}
			}
		}
	}
	for _, s := range seeds {
		visit(g.root(s))
	}
	if children {
		walk(true)
		for r, c := range cls {
			if c == reached {
				frontier = append(frontier, r)
			}
		}
		slices.Sort(frontier)
	}
	walk(false)
	return cls
}
