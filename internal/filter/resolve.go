package filter

import (
	"context"
	"fmt"

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
