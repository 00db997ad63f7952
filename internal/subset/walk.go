package subset

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// A recursive query walks a self reference one step per row it reaches,
// each step an index probe and a pass of the executor's recursion: about
// 4.5 µs a row, so a chain through 200,000 rows (fk-heavy's fk_t01, whose
// row k references k-1) takes 0.9 s. Reading the table's keys once and
// walking them in memory takes a fraction of that, but reads every row:
// a loss for the short chains (a manager's managers) that most walks are.
// So the recursive query is asked first for walkLimit+1 rows; a walk
// longer than that, on a table of at most walkMaxRows rows whose key is
// an integer on both sides (where equality in Go is the foreign key's
// equality), is done in memory (walk).
const (
	walkLimit    = 1000
	walkMaxRows  = 2_000_000
	walkMaxBytes = 64 << 20 // the bound for a table never analyzed
)

// walkable says whether e's walks from leaf may be done in memory: e is
// one integer column on both sides, on a table that is not partitioned
// and holds at most walkMaxRows rows by the planner's count (or, never
// analyzed, at most walkMaxBytes).
func (c *closure) walkable(ctx context.Context, e *edge, leaf uint32) (bool, error) {
	if leaf != e.child || c.g.rels[leaf].partitioned || len(e.childCols) != 1 {
		return false, nil
	}
	if n, ok := c.walks[e]; ok {
		return n >= 0, nil
	}
	var v bool
	var n int64
	if err := c.conn.QueryRow(ctx, `SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples <= $4 ELSE pg_catalog.pg_relation_size(c.oid) <= $5 END AND (SELECT pg_catalog.bool_and(a.atttypid IN ('int2'::pg_catalog.regtype, 'int4'::pg_catalog.regtype, 'int8'::pg_catalog.regtype))
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ($2, $3)), GREATEST(c.reltuples, 0)::pg_catalog.int8
FROM pg_catalog.pg_class c WHERE c.oid = $1`, leaf, e.childCols[0], e.parentCols[0], walkMaxRows, walkMaxBytes).Scan(&v, &n); err != nil {
		return false, fmt.Errorf("subset: read the columns of %s: %w", c.g.rels[leaf].qualified(), pg.ExplainLost(err))
	}
	if !v {
		n = -1
	}
	c.walks[e] = int(min(n, walkMaxRows))
	return v, nil
}

// longWalk says whether the recursive query q, from rows, reaches more
// than walkLimit rows: it counts at most walkLimit+1 of them.
func (c *closure) longWalk(ctx context.Context, q string, rows []tid) (bool, error) {
	var n int
	args := append([]any{pgx.QueryExecModeCacheDescribe}, tidArgs(rows)...)
	if err := c.conn.QueryRow(ctx, "SELECT pg_catalog.count(*) FROM ("+q+" LIMIT "+strconv.Itoa(walkLimit+1)+") s", args...).Scan(&n); err != nil {
		return false, err
	}
	return n > walkLimit, nil
}

// walk keeps the rows of leaf that rows reach along self reference e, up
// (parents, and theirs) or down (children, and theirs), as the recursive
// query would, reading the table's keys once: every row reached,
// distinct, the starting rows only where a cycle reaches them.
//
// The table's rows are read in binary and indexed by their position in
// row id order: a row's value (up: the key it references; down: its own
// key) leads, by a binary search of the values sorted, to the rows it
// reaches (up: those with that key; down: those referencing it). Over
// fk-heavy's 300,000-row fk_t01 this takes a third of the time maps and
// pgx's scanning into pointers did.
func (c *closure) walk(ctx context.Context, e *edge, up bool, leaf uint32, rows []tid, what string) (map[uint32][]tid, error) {
	start := time.Now()
	c.queries++
	q := fmt.Sprintf("SELECT ctid, %s::pg_catalog.int8, %s::pg_catalog.int8 FROM ONLY %s",
		pgx.Identifier{e.parentCols[0]}.Sanitize(), pgx.Identifier{e.childCols[0]}.Sanitize(), c.g.rels[leaf].qualified())
	t, err := c.readWalk(ctx, q, up, max(c.walks[e], 0))
	if err != nil {
		return nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	seen := make([]bool, len(t.ids))
	var out []tid
	var frontier []int32
	for _, r := range rows {
		if i, ok := slices.BinarySearch(t.ids, r); ok {
			frontier = append(frontier, int32(i))
		}
	}
	for len(frontier) > 0 {
		var reached []int32
		for _, i := range frontier {
			if !t.from[i].ok {
				continue // a NULL: no step from this row
			}
			v := t.from[i].v
			j, _ := slices.BinarySearchFunc(t.to, v, func(l link, v int64) int { return cmp.Compare(l.v, v) })
			for ; j < len(t.to) && t.to[j].v == v; j++ {
				if k := t.to[j].row; !seen[k] {
					seen[k] = true
					reached = append(reached, k)
					out = append(out, t.ids[k])
				}
			}
		}
		frontier = reached
	}
	fresh := c.add(leaf, out)
	c.log.Debug("subset query", "what", what+" in memory", "args", len(rows), "rows", len(out), "new", fresh, "duration", time.Since(start).Round(time.Millisecond))
	return map[uint32][]tid{leaf: out}, nil
}

// walkTable is a walked table's rows in row id order (ids), each row's
// value a step reads (from), and the values rows are reached by, sorted
// (to).
type walkTable struct {
	ids  []tid
	from []value
	to   []link
}

// value is an integer that may be NULL.
type value struct {
	v  int64
	ok bool
}

// link is a value that reaches a row (its position in walkTable.ids).
type link struct {
	v   int64
	row int32
}

// readWalk runs q, whose rows are a row id and two int8 columns, the key
// and the key it references, and indexes them for a walk up or down;
// capacity is the planner's count of the rows. The
// rows come in binary and are decoded here, without a scan into values
// per row (300,000 rows: 175 ms through pgx's scanning, against 60 for
// the server to send them).
func (c *closure) readWalk(ctx context.Context, q string, up bool, capacity int) (*walkTable, error) {
	res, err := c.conn.Query(ctx, q, pgx.QueryExecModeCacheDescribe, pgx.QueryResultFormats{pgx.BinaryFormatCode})
	if err != nil {
		return nil, err
	}
	defer res.Close()
	type row struct {
		t         tid
		key, refs value
	}
	all := make([]row, 0, capacity)
	for res.Next() {
		raw := res.RawValues()
		if len(raw) != 3 || len(raw[0]) != 6 {
			return nil, errors.New("a row from the server is not a row id and two int8s")
		}
		r := row{t: tid(uint64(binary.BigEndian.Uint32(raw[0]))<<16 | uint64(binary.BigEndian.Uint16(raw[0][4:])))}
		for i, v := range []*value{&r.key, &r.refs} {
			switch len(raw[i+1]) {
			case 0:
				if raw[i+1] != nil {
					return nil, errors.New("a row from the server is not a row id and two int8s")
				}
			case 8:
				*v = value{int64(binary.BigEndian.Uint64(raw[i+1])), true}
			default:
				return nil, errors.New("a row from the server is not a row id and two int8s")
			}
		}
		all = append(all, r)
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	if len(all) > math.MaxInt32 {
		return nil, fmt.Errorf("%d rows: too many to walk", len(all))
	}
	// A sequential scan returns the rows in row id order, but for one
	// that joined another scan of the table midway (synchronized scans).
	if !slices.IsSortedFunc(all, func(a, b row) int { return cmp.Compare(a.t, b.t) }) {
		slices.SortFunc(all, func(a, b row) int { return cmp.Compare(a.t, b.t) })
	}
	t := &walkTable{ids: make([]tid, len(all)), from: make([]value, len(all)), to: make([]link, 0, len(all))}
	for i, r := range all {
		from, into := r.refs, r.key
		if !up {
			from, into = r.key, r.refs
		}
		t.ids[i], t.from[i] = r.t, from
		if into.ok {
			t.to = append(t.to, link{into.v, int32(i)})
		}
	}
	// Keys given in order (a sequence's) are often stored in order too.
	if byValue := func(a, b link) int { return cmp.Compare(a.v, b.v) }; !slices.IsSortedFunc(t.to, byValue) {
		slices.SortFunc(t.to, byValue)
	}
	return t, nil
}
