package subset

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// rel is a table that holds rows (relkind r) or a partitioned table (p),
// as the snapshot's catalog has it.
type rel struct {
	oid          uint32
	schema, name string
	partitioned  bool
	parent       uint32   // the partitioned table it is a partition of, or 0
	leaves       []uint32 // the tables holding its rows: itself, or its partitions' leaves
}

// from is how a query reads r: with its partitions if partitioned, else
// ONLY its own rows (an inheritance parent's foreign keys and rows are its
// own; each child is a table of its own).
func (r *rel) from() string {
	if r.partitioned {
		return pg.Qualified(r.schema, r.name)
	}
	return "ONLY " + pg.Qualified(r.schema, r.name)
}

func (r *rel) qualified() string { return pg.Qualified(r.schema, r.name) }

// edge is a reference from child's columns to parent's: a foreign key
// (declared on the top of a partition tree when on one: pg_constraint's
// clones on partitions are left out) or a virtual reference.
type edge struct {
	child, parent uint32
	childCols     []string
	parentCols    []string
	ops           []string // "parent OP child" equality operators, as SQL
	// rops are the ops' commutators, "child OP parent" ("" where an
	// operator has none), for a filter on the child's column alone
	// (smallParents).
	rops []string
	name string // for messages
	// declared is a foreign key's, not a virtual reference's: its parent
	// columns are a unique key, so a child row has one parent at most.
	declared bool
}

// graph is the snapshot's tables and the references between them.
type graph struct {
	rels  map[uint32]*rel
	edges []*edge
}

// root is the top of r's partition tree (r itself when not a partition):
// a partition tree is classified as one table.
func (g *graph) root(oid uint32) uint32 {
	for {
		r := g.rels[oid]
		if r == nil || r.parent == 0 {
			return oid
		}
		oid = r.parent
	}
}

// holders is every relation whose rows include leaf's: leaf and its
// partitioned ancestors, the relations a foreign key on leaf's rows may be
// declared on.
func (g *graph) holders(leaf uint32) []uint32 {
	out := []uint32{leaf}
	for r := g.rels[leaf]; r != nil && r.parent != 0; r = g.rels[r.parent] {
		out = append(out, r.parent)
	}
	return out
}

// readGraph reads the tables and foreign keys of the snapshot, and adds
// the virtual references.
func readGraph(ctx context.Context, conn *pgx.Conn, srv pg.Server, refs []Ref) (*graph, error) {
	g := &graph{rels: map[uint32]*rel{}}
	rows, err := conn.Query(ctx, `
SELECT c.oid, n.nspname, c.relname, c.relkind = 'p',
       coalesce((SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class pc ON pc.oid = i.inhparent
                 WHERE i.inhrelid = c.oid AND pc.relkind = 'p'), 0)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'`)
	if err != nil {
		return nil, fmt.Errorf("subset: read tables: %w", err)
	}
	var r rel
	if _, err := pgx.ForEachRow(rows, []any{&r.oid, &r.schema, &r.name, &r.partitioned, &r.parent}, func() error {
		c := r
		g.rels[c.oid] = &c
		return nil
	}); err != nil {
		return nil, fmt.Errorf("subset: read tables: %w", err)
	}
	for oid, r := range g.rels {
		if r.partitioned {
			continue
		}
		for _, h := range g.holders(oid) {
			g.rels[h].leaves = append(g.rels[h].leaves, oid)
		}
	}
	for _, r := range g.rels {
		slices.Sort(r.leaves)
	}
	// A foreign key on a partitioned table is cloned onto each partition
	// (and, referencing one, onto each referenced partition): conparentid
	// marks the clones, which the top constraint covers.
	top := "true"
	if srv.VersionNum >= 110000 {
		top = "con.conparentid = 0"
	}
	rows, err = conn.Query(ctx, `
SELECT con.conrelid, con.confrelid, con.conname,
  ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)
        JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),
  ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i)
        JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i),
  ARRAY(SELECT pg_catalog.format('OPERATOR(%I.%s)', ns.nspname, o.oprname) FROM unnest(con.conpfeqop) WITH ORDINALITY k(op, i)
        JOIN pg_catalog.pg_operator o ON o.oid = k.op JOIN pg_catalog.pg_namespace ns ON ns.oid = o.oprnamespace ORDER BY k.i),
  ARRAY(SELECT coalesce(pg_catalog.format('OPERATOR(%I.%s)', ns.nspname, o.oprname), '') FROM unnest(con.conpfeqop) WITH ORDINALITY k(op, i)
        JOIN pg_catalog.pg_operator f ON f.oid = k.op LEFT JOIN pg_catalog.pg_operator o ON o.oid = f.oprcom
        LEFT JOIN pg_catalog.pg_namespace ns ON ns.oid = o.oprnamespace ORDER BY k.i)
FROM pg_catalog.pg_constraint con
WHERE con.contype = 'f' AND `+top+`
ORDER BY con.oid`)
	if err != nil {
		return nil, fmt.Errorf("subset: read foreign keys: %w", err)
	}
	var e edge
	if _, err := pgx.ForEachRow(rows, []any{&e.child, &e.parent, &e.name, &e.childCols, &e.parentCols, &e.ops, &e.rops}, func() error {
		if g.rels[e.child] == nil || g.rels[e.parent] == nil {
			return nil // a system table's
		}
		c := e
		c.declared = true
		g.edges = append(g.edges, &c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("subset: read foreign keys: %w", err)
	}
	for _, ref := range refs {
		e, err := g.virtual(ctx, conn, ref)
		if err != nil {
			return nil, err
		}
		g.edges = append(g.edges, e)
	}
	return g, nil
}

// virtual is ref as an edge, its tables and columns checked in the
// snapshot.
func (g *graph) virtual(ctx context.Context, conn *pgx.Conn, ref Ref) (*edge, error) {
	e := &edge{childCols: ref.ChildColumns, parentCols: ref.ParentColumns, name: "--subset-ref " + ref.Text}
	var err error
	if e.child, err = g.resolve(ctx, conn, ref.Child); err != nil {
		return nil, fmt.Errorf("--subset-ref %s: %w", ref.Text, err)
	}
	if e.parent, err = g.resolve(ctx, conn, ref.Parent); err != nil {
		return nil, fmt.Errorf("--subset-ref %s: %w", ref.Text, err)
	}
	for _, side := range []struct {
		oid  uint32
		cols []string
	}{{e.child, e.childCols}, {e.parent, e.parentCols}} {
		var missing []string
		if err := conn.QueryRow(ctx, `SELECT ARRAY(SELECT c FROM unnest($2::text[]) c WHERE NOT EXISTS (
  SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1 AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped))`,
			side.oid, side.cols).Scan(&missing); err != nil {
			return nil, fmt.Errorf("--subset-ref %s: %w", ref.Text, err)
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("--subset-ref %s: table %s has no column %s", ref.Text, g.rels[side.oid].qualified(), pgx.Identifier{missing[0]}.Sanitize())
		}
	}
	for range e.childCols {
		e.ops = append(e.ops, "=")
		e.rops = append(e.rops, "=")
	}
	return e, nil
}

// RefusedError is a --subset rule naming a table the source does not
// have: the user's input is wrong, as with mask.RefusedError, and both
// are usage errors (exit 2), refused before any row is read.
type RefusedError struct{ err error }

func (e *RefusedError) Error() string { return e.err.Error() }

// Unwrap is the refusal's own error.
func (e *RefusedError) Unwrap() error { return e.err }

// resolve finds a table named as SQL spells it (search path, quoting and
// case folding as the server applies them) in the snapshot.
func (g *graph) resolve(ctx context.Context, conn *pgx.Conn, name string) (uint32, error) {
	var oid *uint32
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1)::oid", name).Scan(&oid); err != nil {
		return 0, fmt.Errorf("look up table %s: %w", name, err)
	}
	if oid == nil || g.rels[*oid] == nil {
		hint := ""
		if !strings.Contains(name, `"`) && strings.ToLower(name) != name {
			hint = ` (unquoted names fold to lower case: double-quote a name that has capitals, as "Schema"."Table")`
		}
		return 0, &RefusedError{fmt.Errorf("no table %s in the source database%s", name, hint)}
	}
	return *oid, nil
}
