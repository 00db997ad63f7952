package restore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// readForeignKeys reads the target's foreign keys (foreignKeys), which
// order a --data-only restore's loads.
func (d *dataStage) readForeignKeys(ctx context.Context) (map[string][]string, error) {
	conn, err := pg.Connect(ctx, d.target.cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return foreignKeys(ctx, conn)
}

// foreignKeys returns, for each table of the target, the tables its
// foreign keys reference (partition to partition, as the server checks
// them), by taskgraph.TableKey.
func foreignKeys(ctx context.Context, conn *pgx.Conn) (map[string][]string, error) {
	rows, err := conn.Query(ctx, `SELECT cn.nspname, c.relname, rn.nspname, rc.relname
	FROM pg_catalog.pg_constraint k
	JOIN pg_catalog.pg_class c ON c.oid = k.conrelid JOIN pg_catalog.pg_namespace cn ON cn.oid = c.relnamespace
	JOIN pg_catalog.pg_class rc ON rc.oid = k.confrelid JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
	WHERE k.contype = 'f'`)
	if err != nil {
		return nil, fmt.Errorf("read foreign keys: %w", err)
	}
	defer rows.Close()
	refs := map[string][]string{}
	for rows.Next() {
		var cs, cr, rs, rr string
		if err := rows.Scan(&cs, &cr, &rs, &rr); err != nil {
			return nil, fmt.Errorf("read foreign keys: %w", err)
		}
		from := taskgraph.TableKey(cs, cr)
		refs[from] = append(refs[from], taskgraph.TableKey(rs, rr))
	}
	return refs, rows.Err()
}

// orderLoads makes a --data-only restore load referenced tables before the
// tables whose foreign keys point at them, since the target checks every
// row as it arrives. Within one COPY the checks wait for the statement's
// end, so a table that references itself is fine as one chunk; across
// chunks, or around a cycle of tables, no order works: those need
// --disable-triggers.
func orderLoads(g *schedule.Graph, loads map[string][]int, refs map[string][]string) error {
	for from, tos := range refs {
		for _, to := range tos {
			if len(loads[from]) == 0 || len(loads[to]) == 0 {
				continue
			}
			if from == to {
				if len(loads[from]) > 1 {
					return fmt.Errorf("--data-only: table %s references itself and is loaded in %d chunks, which the foreign key may check before the rows they reference are in: use --disable-triggers", keyName(from), len(loads[from]))
				}
				continue
			}
			for _, t := range loads[from] {
				g.Tasks[t].Deps = append(g.Tasks[t].Deps, loads[to]...)
			}
		}
	}
	if cycle := findCycle(loads, refs); cycle != nil {
		names := make([]string, len(cycle))
		for i, k := range cycle {
			names[i] = keyName(k)
		}
		return fmt.Errorf("--data-only: foreign keys form a cycle (%s): no load order satisfies them; use --disable-triggers", strings.Join(names, " -> "))
	}
	return nil
}

// findCycle returns a cycle of references between distinct loaded tables,
// or nil.
func findCycle(loads map[string][]int, refs map[string][]string) []string {
	const (
		unseen = iota
		active
		finished
	)
	state := map[string]int{}
	var path []string
	var visit func(k string) []string
	visit = func(k string) []string {
		state[k] = active
		path = append(path, k)
		for _, to := range refs[k] {
			if to == k || len(loads[to]) == 0 {
				continue
			}
			switch state[to] {
			case active:
				for i, p := range path {
					if p == to {
						return append(append([]string{}, path[i:]...), to)
					}
				}
			case unseen:
				if c := visit(to); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[k] = finished
		return nil
	}
	keys := make([]string, 0, len(loads))
	for k := range loads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if state[k] == unseen && len(loads[k]) > 0 {
			if c := visit(k); c != nil {
				return c
			}
		}
	}
	return nil
}

// keyName turns a taskgraph.TableKey back into a quoted name.
func keyName(key string) string {
	schema, name, _ := strings.Cut(key, "\x00")
	return pg.Qualified(schema, name)
}
