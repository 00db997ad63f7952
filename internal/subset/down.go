package subset

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// downward keeps, to the fixed point, the rows that reference the pending
// rows (the seeds'), and those referencing them (--subset-children).
//
// It follows them by child table rather than by parent batch: the new
// rows wait, per reference, until the child table they lead to is the
// nearest to the seeds among those with rows waiting (downOrder), so
// that every parent table above it has all its rows; then the references
// into that table whose child columns have no index, which a join reads
// the whole child table for, are followed in one query (downMany): one
// scan of pgbench s100's history for its branches, tellers and accounts,
// not three. A reference whose child columns have an index is followed on
// its own, by the index. Which order the rows are followed in changes
// the work, never the closure: each kept row is followed along each
// reference once, whichever query does it.
func (c *closure) downward(ctx context.Context) error {
	rank := downOrder(c.g)
	wait := map[*edge]map[uint32][]tid{}
	for {
		for leaf, rows, ok := c.next(); ok; leaf, rows, ok = c.next() {
			for _, h := range c.g.holders(leaf) {
				for _, e := range c.g.edges {
					if e.parent == h {
						if wait[e] == nil {
							wait[e] = map[uint32][]tid{}
						}
						wait[e][leaf] = append(wait[e][leaf], rows...)
					}
				}
			}
		}
		if len(wait) == 0 {
			return nil
		}
		child := slices.MinFunc(slices.Collect(maps.Keys(wait)), func(a, b *edge) int {
			return cmp.Or(cmp.Compare(rank[c.g.root(a.child)], rank[c.g.root(b.child)]), cmp.Compare(a.child, b.child))
		}).child
		// The references into child from other tables first: a self
		// reference's turn comes once they have brought their rows.
		var into, self, many []*edge
		for _, e := range c.g.edges {
			switch {
			case wait[e] == nil || e.child != child:
			case e.self():
				self = append(self, e)
			default:
				into = append(into, e)
			}
		}
		if len(into) == 0 {
			into = self
		}
		for _, e := range into {
			indexed, err := c.indexed(ctx, e)
			if err != nil {
				return err
			}
			if !indexed && !e.self() {
				many = append(many, e)
			}
		}
		if len(many) > 1 {
			taken := map[*edge]map[uint32][]tid{}
			for _, e := range many {
				taken[e] = map[uint32][]tid{}
				for leaf, rows := range wait[e] {
					n := min(len(rows), c.batch)
					taken[e][leaf] = rows[:n]
					if wait[e][leaf] = rows[n:]; len(wait[e][leaf]) == 0 {
						delete(wait[e], leaf)
					}
				}
				if len(wait[e]) == 0 {
					delete(wait, e)
				}
			}
			if err := c.downMany(ctx, child, many, taken); err != nil {
				return err
			}
			continue
		}
		for _, e := range into {
			for _, leaf := range slices.Sorted(maps.Keys(wait[e])) {
				rows := wait[e][leaf]
				for len(rows) > 0 {
					n := min(len(rows), c.batch)
					if err := c.followDown(ctx, e, leaf, rows[:n]); err != nil {
						return err
					}
					rows = rows[n:]
				}
			}
			delete(wait, e)
		}
	}
}

// downOrder ranks the partition trees (by root) in the order downward
// follows them: a table after every table it references, where the
// references make no cycle (Kahn's order; a cycle is broken at its lowest
// OID).
func downOrder(g *graph) map[uint32]int {
	in := map[uint32]int{} // references into a root from other roots
	out := map[uint32][]uint32{}
	roots := map[uint32]bool{}
	for oid := range g.rels {
		roots[g.root(oid)] = true
	}
	for _, e := range g.edges {
		p, ch := g.root(e.parent), g.root(e.child)
		if p != ch {
			in[ch]++
			out[p] = append(out[p], ch)
		}
	}
	rank := map[uint32]int{}
	for len(rank) < len(roots) {
		var ready []uint32
		for r := range roots {
			if _, done := rank[r]; !done && in[r] == 0 {
				ready = append(ready, r)
			}
		}
		if len(ready) == 0 { // a cycle: break it at its lowest OID
			for r := range roots {
				if _, done := rank[r]; !done {
					ready = append(ready, r)
				}
			}
			ready = []uint32{slices.Min(ready)}
		}
		slices.Sort(ready)
		for _, r := range ready {
			rank[r] = len(rank)
			for _, ch := range out[r] {
				in[ch]--
			}
		}
	}
	return rank
}

// indexed says whether an index of e's child relation starts with one of
// e's child columns, so that a join can find the child rows of a few
// parent rows without reading the whole table.
func (c *closure) indexed(ctx context.Context, e *edge) (bool, error) {
	if v, ok := c.index[e]; ok {
		return v, nil
	}
	var v bool
	if err := c.conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
  WHERE i.indrelid = $1 AND a.attname = ANY ($2::text[]))`, e.child, e.childCols).Scan(&v); err != nil {
		return false, fmt.Errorf("subset: read the indexes of %s: %w", c.g.rels[e.child].qualified(), pg.ExplainLost(err))
	}
	c.index[e] = v
	return v, nil
}

// downMany keeps the rows of child that reference rows[e] along any of
// edges (references into child), in one query that reads child once: it
// joins child to the parent keys of each reference's rows, and says by a
// flag per reference which ones each row matched, for skip. A one-column
// reference from at most smallParents parent rows is a filter instead of
// a join, as in down: pgbench s100's history, a million rows, is matched
// to its one branch and ten tellers in a comparison per row each, where
// two hash joins took 230 ms of the 710.
func (c *closure) downMany(ctx context.Context, child uint32, edges []*edge, rows map[*edge]map[uint32][]tid) error {
	var args []any
	var joins []string
	flags := make([]string, len(edges))
	names := make([]string, len(edges))
	for i, e := range edges {
		keys := make([]string, len(e.parentCols))
		cols := make([]string, len(e.parentCols))
		for j, col := range e.parentCols {
			keys[j] = fmt.Sprintf("k%d", j+1)
			cols[j] = "p." + pgx.Identifier{col}.Sanitize()
		}
		var parts []string
		n := 0
		for _, leaf := range slices.Sorted(maps.Keys(rows[e])) {
			parts = append(parts, fmt.Sprintf("SELECT %s FROM ONLY %s p WHERE %s", strings.Join(cols, ", "), c.g.rels[leaf].qualified(), rowsInAt("p", len(args)+1)))
			args = append(args, tidArgs(rows[e][leaf])...)
			n += len(rows[e][leaf])
		}
		names[i] = e.name
		if len(e.childCols) == 1 && e.rops[0] != "" && n <= smallParents {
			flags[i] = fmt.Sprintf("(c.%s %s ANY (ARRAY(%s))) IS TRUE", pgx.Identifier{e.childCols[0]}.Sanitize(), e.rops[0], strings.Join(parts, " UNION ALL "))
			continue
		}
		// A foreign key's parent keys are unique; a virtual reference's
		// may repeat, and would repeat the child rows they match.
		distinct := ""
		if !e.declared || len(parts) > 1 {
			distinct = "DISTINCT "
		}
		j := fmt.Sprintf("j%d", i+1)
		joins = append(joins, fmt.Sprintf("LEFT JOIN (SELECT %s*, true FROM (%s) s) %s(%s, m) ON %s",
			distinct, strings.Join(parts, " UNION ALL "), j, strings.Join(keys, ", "), e.on(j, keys, "c", e.childCols)))
		flags[i] = j + ".m IS NOT NULL"
	}
	q := fmt.Sprintf("SELECT c.tableoid::pg_catalog.oid, c.ctid, %s FROM %s c %s WHERE %s",
		strings.Join(flags, ", "), c.g.rels[child].from(), strings.Join(joins, " "), strings.Join(flags, " OR "))
	_, byEdge, err := c.queryFlagged(ctx, "follow "+strings.Join(names, ", ")+" to their children", q, len(edges), args...)
	if err != nil {
		return err
	}
	for i, e := range edges {
		if e.declared {
			c.skip(e, true, byEdge[i])
		}
	}
	return nil
}
