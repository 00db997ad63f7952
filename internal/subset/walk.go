package subset

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	if v, ok := c.walks[e]; ok {
		return v, nil
	}
	var v bool
	if err := c.conn.QueryRow(ctx, `SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples <= $4 ELSE pg_catalog.pg_relation_size(c.oid) <= $5 END AND (SELECT pg_catalog.bool_and(a.atttypid IN ('int2'::pg_catalog.regtype, 'int4'::pg_catalog.regtype, 'int8'::pg_catalog.regtype))
  FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attname IN ($2, $3))
FROM pg_catalog.pg_class c WHERE c.oid = $1`, leaf, e.childCols[0], e.parentCols[0], walkMaxRows, walkMaxBytes).Scan(&v); err != nil {
		return false, fmt.Errorf("subset: read the columns of %s: %w", c.g.rels[leaf].qualified(), pg.ExplainLost(err))
	}
	c.walks[e] = v
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

// link is a row of a walked table: its row id and one integer (its key,
// or the key it references).
type link struct {
	v int64
	t tid
}

// walk keeps the rows of leaf that rows reach along self reference e, up
// (parents, and theirs) or down (children, and theirs), as the recursive
// query would, reading the table's keys once: every row reached,
// distinct, the starting rows only where a cycle reaches them.
func (c *closure) walk(ctx context.Context, e *edge, up bool, leaf uint32, rows []tid, what string) (map[uint32][]tid, error) {
	start := time.Now()
	c.queries++
	q := fmt.Sprintf("SELECT ctid, %s::pg_catalog.int8, %s::pg_catalog.int8 FROM ONLY %s",
		pgx.Identifier{e.parentCols[0]}.Sanitize(), pgx.Identifier{e.childCols[0]}.Sanitize(), c.g.rels[leaf].qualified())
	res, err := c.conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	// next is each row's value a step reads (up: the key it references;
	// down: its own key), by row id; to are the rows a value leads to
	// (up: the rows with that key; down: the rows referencing it).
	var next, to []link
	var t pgtype.TID
	var key, ref *int64
	if _, err := pgx.ForEachRow(res, []any{&t, &key, &ref}, func() error {
		from, into := ref, key
		if !up {
			from, into = key, ref
		}
		if from != nil {
			next = append(next, link{*from, tidOf(t)})
		}
		if into != nil {
			to = append(to, link{*into, tidOf(t)})
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("subset: %s: %w", what, pg.ExplainLost(err))
	}
	slices.SortFunc(next, func(a, b link) int { return cmp.Compare(a.t, b.t) })
	slices.SortFunc(to, func(a, b link) int { return cmp.Compare(a.v, b.v) })
	seen := map[tid]bool{}
	var out []tid
	for frontier := rows; len(frontier) > 0; {
		var reached []tid
		for _, r := range frontier {
			i, ok := slices.BinarySearchFunc(next, r, func(l link, r tid) int { return cmp.Compare(l.t, r) })
			if !ok {
				continue // a NULL: no step from this row
			}
			v := next[i].v
			j, _ := slices.BinarySearchFunc(to, v, func(l link, v int64) int { return cmp.Compare(l.v, v) })
			for ; j < len(to) && to[j].v == v; j++ {
				if !seen[to[j].t] {
					seen[to[j].t] = true
					reached = append(reached, to[j].t)
				}
			}
		}
		out = append(out, reached...)
		frontier = reached
	}
	fresh := c.add(leaf, out)
	c.log.Debug("subset query", "what", what+" in memory", "args", len(rows), "rows", len(out), "new", fresh, "duration", time.Since(start).Round(time.Millisecond))
	return map[uint32][]tid{leaf: out}, nil
}
