package filter

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Rel names a relation by its unquoted schema and name.
type Rel struct{ Schema, Name string }

// Resolved is a selection evaluated against one database's catalog.
type Resolved struct {
	Selected map[Rel]bool // relations pg_dump would dump, and sequences owned by dumped tables
	NoData   map[Rel]bool // matched by --exclude-table-data
}

// Resolve evaluates the selection on conn with pg_dump's query semantics
// (the connection's search path decides what an unqualified pattern sees).
func (o Options) Resolve(ctx context.Context, conn *pgx.Conn) (*Resolved, error) {
	conds, err := o.conditions("c", "n")
	if err != nil {
		return nil, err
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_database()").Scan(&db); err != nil {
		return nil, fmt.Errorf("select tables: %w", err)
	}
	if err := o.CheckDatabase(db); err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`SELECT n.nspname, c.relname, %s, %s
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'S', 'v', 'm', 'f')
	UNION ALL
	SELECT sn.nspname, s.relname, true, false
		FROM pg_catalog.pg_class s JOIN pg_catalog.pg_namespace sn ON sn.oid = s.relnamespace
		JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = s.oid
			AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')
		JOIN pg_catalog.pg_class c ON c.oid = d.refobjid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE s.relkind = 'S' AND (%s)`, conds.selected, conds.noData, conds.selected)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("select tables: %w", err)
	}
	defer rows.Close()
	r := &Resolved{Selected: map[Rel]bool{}, NoData: map[Rel]bool{}}
	for rows.Next() {
		var rel Rel
		var sel, noData bool
		if err := rows.Scan(&rel.Schema, &rel.Name, &sel, &noData); err != nil {
			return nil, fmt.Errorf("select tables: %w", err)
		}
		r.Selected[rel] = r.Selected[rel] || sel
		r.NoData[rel] = r.NoData[rel] || noData
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select tables: %w", err)
	}
	return r, nil
}

// Expand turns the *AndChildren patterns into exact names read from conn's
// catalog, as pg_dump expands --table-and-children: the relations the
// pattern matches and, recursively, every table that inherits from one of
// them (partitions included). The exact names join Tables, ExcludeTables
// and ExcludeTableData, so that pgsprint's catalog query and pg_dump see
// one selection (and pg_dump need not know the flags, new in 16). Read it
// in the dump's snapshot.
func (o Options) Expand(ctx context.Context, conn *pgx.Conn) (Options, error) {
	for _, set := range []struct {
		pats    []string
		dst     *[]string
		include bool
	}{{o.TableAndChildren, &o.Tables, true}, {o.ExcludeTableAndChildren, &o.ExcludeTables, false}, {o.ExcludeTableDataAndChildren, &o.ExcludeTableData, false}} {
		for _, text := range set.pats {
			names, err := children(ctx, conn, text)
			if err != nil {
				return o, err
			}
			if set.include && len(names) == 0 {
				return o, fmt.Errorf("no matching tables were found for pattern %q", text)
			}
			*set.dst = append(*set.dst, names...)
		}
	}
	o.TableAndChildren, o.ExcludeTableAndChildren, o.ExcludeTableDataAndChildren = nil, nil, nil
	return o, nil
}

// children returns, as exact quoted patterns, the relations pattern text
// matches and every table inheriting from them.
func children(ctx context.Context, conn *pgx.Conn, text string) ([]string, error) {
	p, err := Parse(text)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`WITH RECURSIVE tree(oid) AS (
		SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind OPERATOR(pg_catalog.=) ANY (array['r', 'S', 'v', 'm', 'f', 'p']) AND (%s)
		UNION SELECT i.inhrelid FROM tree JOIN pg_catalog.pg_inherits i ON i.inhparent = tree.oid)
	SELECT n.nspname, c.relname FROM tree JOIN pg_catalog.pg_class c ON c.oid = tree.oid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace ORDER BY 1, 2`, p.sql("c", "n"))
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("expand %s: %w", text, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s, n string
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("expand %s: %w", text, err)
		}
		out = append(out, exact(s)+"."+exact(n))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expand %s: %w", text, err)
	}
	return out, nil
}

// exact quotes a name as a pattern that matches only that name.
func exact(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
