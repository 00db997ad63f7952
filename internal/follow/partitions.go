package follow

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// withPartitions returns f with the partitions (at every level) of the
// partitioned tables it selects added to its -t patterns, as exact names:
// a publication of a partitioned table publishes its partitions' changes
// under their own names, so the clone must copy them, or the target's
// subscription finds no table to apply them to. pg_dump's -t on a
// partitioned table takes its definition alone (no rows); a follow of it
// means its rows. A partition that f leaves out on purpose (-T,
// --exclude-table-data), or that a -n/-N selection does not reach, is
// refused: its changes would be published all the same.
func withPartitions(ctx context.Context, conn *pgx.Conn, f filter.Options) (filter.Options, error) {
	if !f.Active() {
		return f, nil // the whole database: every partition is selected
	}
	selected, noData, err := f.Conditions("c", "n")
	if err != nil {
		return f, err
	}
	excluded := "false"
	if len(f.ExcludeTables) > 0 {
		if excluded, err = (filter.Options{Selection: filter.Selection{Tables: f.ExcludeTables}}).Selected("c", "n"); err != nil {
			return f, err
		}
	}
	rows, err := conn.Query(ctx, `WITH RECURSIVE tree(oid, root) AS (
			SELECT c.oid, c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind = 'p' AND NOT c.relispartition AND (`+selected+`) AND NOT (`+noData+`)
			UNION
			SELECT i.inhrelid, tree.root FROM tree JOIN pg_catalog.pg_inherits i ON i.inhparent = tree.oid)
		SELECT n.nspname, c.relname, pg_catalog.format('%I.%I', n.nspname, c.relname), pg_catalog.format('%I.%I', rn.nspname, r.relname),
			(`+selected+`), (`+excluded+`), (`+noData+`)
		FROM tree JOIN pg_catalog.pg_class c ON c.oid = tree.oid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_class r ON r.oid = tree.root JOIN pg_catalog.pg_namespace rn ON rn.oid = r.relnamespace
		WHERE tree.oid <> tree.root
		ORDER BY 3`)
	if err != nil {
		return f, fmt.Errorf("list the partitions of the selected partitioned tables: %w", err)
	}
	type part struct {
		schema, name, quoted, root string
		sel, excl, noData          bool
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (part, error) {
		var p part
		return p, r.Scan(&p.schema, &p.name, &p.quoted, &p.root, &p.sel, &p.excl, &p.noData)
	})
	if err != nil {
		return f, fmt.Errorf("list the partitions of the selected partitioned tables: %w", err)
	}
	var add, refused []string
	for _, p := range parts {
		switch {
		case p.excl || p.noData:
			refused = append(refused, p.quoted+" (of "+p.root+", left out by -T or --exclude-table-data)")
		case p.sel:
		case len(f.Tables) == 0:
			refused = append(refused, p.quoted+" (of "+p.root+", outside the -n/-N selection)")
		default:
			add = append(add, exactPattern(p.schema)+"."+exactPattern(p.name))
		}
	}
	if len(refused) > 0 {
		return f, fmt.Errorf("a followed partitioned table publishes the changes of all its partitions, and these are not in the selection: %s; follow the whole partitioned table (-t on it takes its partitions), or leave it out",
			pg.Shorten(strings.Join(refused, ", "), 300))
	}
	f.Tables = append(append([]string(nil), f.Tables...), add...)
	return f, nil
}

// exactPattern quotes a name as a -t pattern that matches only that name.
func exactPattern(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
