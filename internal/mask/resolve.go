package mask

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Resolved is the rules resolved against the schema: each masked column of
// each table read, its rule and what its type lets the rule write.
// Partitions and inheritance children take their parent's rules.
type Resolved struct {
	secret []byte
	tables map[string]*planTable // by schema + "\x00" + name
	order  []string
}

type planTable struct {
	schema, name string
	columns      map[string]column // by column name; index set by Table
	names        []string          // in the order resolved
}

// RefusedError is rules that do not fit the schema: an unknown table or
// column, a type the rule cannot write, a key a rule cannot keep unique,
// a foreign key whose two sides are not masked alike. Nothing is read.
type RefusedError struct {
	Problems []string
}

// Error is the problems on one line.
func (e *RefusedError) Error() string {
	return "masking refused: " + strings.Join(e.Problems, "; ")
}

// Resolve checks spec's rules against the schema conn sees (the dump's
// snapshot, on its leader: conn must be in a transaction, as the check
// of a const value runs in a savepoint) and returns the plan, or a
// *RefusedError listing every problem. encoding is the data's (the
// server encoding: COPY text is read in it).
func Resolve(ctx context.Context, conn *pgx.Conn, spec Spec, encoding string) (*Resolved, error) {
	if len(spec.Secret) == 0 {
		return nil, &RefusedError{Problems: []string{"masking needs a secret: --mask-secret-file FILE or $" + SecretEnv}}
	}
	p := &Resolved{secret: spec.Secret, tables: map[string]*planTable{}}
	var problems []string
	type key struct {
		rel    uint32
		attnum int16
	}
	masked := map[key]Rule{}
	refusedCols := map[key]bool{}
	var rels []uint32
	explicit := map[string]bool{}
	for _, r := range spec.Rules {
		k := r.Schema + "\x00" + r.Table + "\x00" + r.Column
		if explicit[k] {
			problems = append(problems, fmt.Sprintf("%s has two rules", r.Name()))
		}
		explicit[k] = true
	}
	for _, r := range spec.Rules {
		found, err := tree(ctx, conn, r.Schema, r.Table)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			problems = append(problems, fmt.Sprintf("%s: no table %s", r.Name(), pg.Qualified(r.Schema, r.Table)))
			continue
		}
		for i, rel := range found {
			if i > 0 && explicit[rel.schema+"\x00"+rel.name+"\x00"+r.Column] {
				continue // a child's own rule wins
			}
			col, ok, err := readColumn(ctx, conn, rel.oid, r.Column)
			if err != nil {
				return nil, err
			}
			name := pg.Qualified(rel.schema, rel.name) + "." + pg.Ident(r.Column)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s: no column %s in table %s", name, pg.Ident(r.Column), pg.Qualified(rel.schema, rel.name)))
				break
			}
			msg := check(r, col, encoding)
			if msg == "" && r.Kind == Const {
				if msg, err = castable(ctx, conn, r.Value, col.typ); err != nil {
					return nil, err
				}
			}
			if msg != "" {
				problems = append(problems, name+": "+msg)
				// Reported once: its foreign keys are not checked
				// against it, which would call it not masked.
				refusedCols[key{rel.oid, col.attnum}] = true
				rels = append(rels, rel.oid)
				break
			}
			masked[key{rel.oid, col.attnum}] = r
			rels = append(rels, rel.oid)
			if r.Kind == Keep {
				continue
			}
			tk := rel.schema + "\x00" + rel.name
			t := p.tables[tk]
			if t == nil {
				t = &planTable{schema: rel.schema, name: rel.name, columns: map[string]column{}}
				p.tables[tk] = t
				p.order = append(p.order, tk)
			}
			t.columns[r.Column] = column{rule: r, class: col.class, limit: col.limit, utf8: encoding == "UTF8"}
			t.names = append(t.names, r.Column)
		}
	}
	// Both sides of a foreign key must be masked alike, or the copy's
	// references would point at values no parent has.
	fks, err := foreignKeys(ctx, conn, rels)
	if err != nil {
		return nil, err
	}
	for _, fk := range fks {
		for i := range fk.childCols {
			if refusedCols[key{fk.child, fk.childCols[i]}] || refusedCols[key{fk.parent, fk.parentCols[i]}] {
				continue
			}
			a, aok := masked[key{fk.child, fk.childCols[i]}]
			b, bok := masked[key{fk.parent, fk.parentCols[i]}]
			ra, rb := ruleOf(a, aok), ruleOf(b, bok)
			if ra == rb {
				continue
			}
			problems = append(problems, fmt.Sprintf("foreign key %s: %s.%s is %s but %s.%s is %s: mask both with the same rule",
				pg.Ident(fk.name), fk.childName, pg.Ident(fk.childAtt[i]), describe(ra), fk.parentName, pg.Ident(fk.parentAtt[i]), describe(rb)))
		}
	}
	if len(problems) > 0 {
		return nil, &RefusedError{Problems: problems}
	}
	return p, nil
}

// ruleOf is the rule text a column is masked with, "" when it is not.
func ruleOf(r Rule, ok bool) string {
	if !ok || r.Kind == Keep {
		return ""
	}
	return r.Text
}

func describe(rule string) string {
	if rule == "" {
		return "not masked"
	}
	return "masked with " + rule
}

// Table is the masking of one table read as columns (its COPY column
// list), or nil when none of them is masked.
func (p *Resolved) Table(schema, name string, columns []string) *TableMask {
	if p == nil {
		return nil
	}
	pt := p.tables[schema+"\x00"+name]
	if pt == nil {
		return nil
	}
	t := &TableMask{name: pg.Qualified(schema, name), columns: len(columns), secret: p.secret}
	for i, c := range columns {
		if col, ok := pt.columns[c]; ok {
			col.index = i
			t.masked = append(t.masked, col)
		}
	}
	if len(t.masked) == 0 {
		return nil
	}
	return t
}

// Masks says whether the plan rewrites column of table schema.name:
// values of such a column must reach nothing pgsprint writes, not even as
// a chunk's key range (internal/chunk). Keep is not masking.
func (p *Resolved) Masks(schema, table, column string) bool {
	if p == nil {
		return false
	}
	pt := p.tables[schema+"\x00"+table]
	if pt == nil {
		return false
	}
	c, ok := pt.columns[column]
	return ok && c.rule.Kind != Keep
}

// Record is what the manifest says of the masking: every masked column
// and its rule, never the secret.
func (p *Resolved) Record() *archive.Mask {
	m := &archive.Mask{}
	for _, k := range p.order {
		t := p.tables[k]
		for _, c := range t.names {
			m.Columns = append(m.Columns, archive.MaskColumn{Schema: t.schema, Table: t.name, Column: c, Rule: t.columns[c].rule.Text})
		}
	}
	return m
}

// rel is a table and where it is.
type rel struct {
	oid          uint32
	schema, name string
}

// tree is the table schema.name (a plain or partitioned table) and every
// partition and inheritance child under it, the table first; nil if
// there is no such table.
func tree(ctx context.Context, conn *pgx.Conn, schema, name string) ([]rel, error) {
	rows, err := conn.Query(ctx, `
		WITH RECURSIVE t(oid, depth) AS (
			SELECT c.oid, 0 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p')
			UNION ALL
			SELECT i.inhrelid, t.depth + 1 FROM pg_catalog.pg_inherits i JOIN t ON i.inhparent = t.oid
		)
		SELECT c.oid, n.nspname, c.relname FROM t JOIN pg_catalog.pg_class c ON c.oid = t.oid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') ORDER BY t.depth, c.oid`, schema, name)
	if err != nil {
		return nil, fmt.Errorf("mask: find table %s: %w", pg.Qualified(schema, name), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rel, error) {
		var x rel
		return x, r.Scan(&x.oid, &x.schema, &x.name)
	})
	if err != nil {
		return nil, fmt.Errorf("mask: find table %s: %w", pg.Qualified(schema, name), err)
	}
	return out, nil
}

// columnInfo is what a rule needs to know of its column.
type columnInfo struct {
	attnum    int16
	notNull   bool
	generated bool
	unique    bool // in a primary key or a unique index, its expressions or predicate included
	typ       string
	class     class
	limit     int
}

func readColumn(ctx context.Context, conn *pgx.Conn, relid uint32, name string) (columnInfo, bool, error) {
	var c columnInfo
	var typname, category string
	var typmod int32
	err := conn.QueryRow(ctx, `
		SELECT a.attnum, a.attnotnull, coalesce(pg_catalog.to_jsonb(a)->>'attgenerated', '') <> '',
		       b.typname::text, b.typcategory::text, CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END,
		       pg_catalog.format_type(a.atttypid, a.atttypmod),
		       EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = a.attrelid AND i.indisunique AND (a.attnum = ANY (i.indkey::int2[])
		               OR EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
		                          AND d.objid = i.indexrelid AND d.refobjid = a.attrelid AND d.refobjsubid = a.attnum)))
		FROM pg_catalog.pg_attribute a
		JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
		WHERE a.attrelid = $1 AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, relid, name).
		Scan(&c.attnum, &c.notNull, &c.generated, &typname, &category, &typmod, &c.typ, &c.unique)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("mask: read column %s: %w", pg.Ident(name), err)
	}
	switch typname {
	case "uuid":
		c.class = classUUID
	case "int2":
		c.class = classInt2
	case "int4":
		c.class = classInt4
	case "int8":
		c.class = classInt8
	case "numeric", "float4", "float8":
		c.class = classNumeric
	case "date", "timestamp", "timestamptz":
		c.class = classDate
	default:
		if category == "S" {
			c.class = classText
		}
	}
	if (typname == "varchar" || typname == "bpchar") && typmod > 4 {
		c.limit = int(typmod - 4)
	}
	return c, true, nil
}

// check says why rule r cannot be used on column c, or "".
func check(r Rule, c columnInfo, encoding string) string {
	if r.Kind == Keep {
		return ""
	}
	if c.generated {
		return "a generated column: the target computes it (mask the columns it is computed from)"
	}
	switch r.Kind {
	case Email, Name, Phone, Text, Regex:
		if c.class != classText {
			return fmt.Sprintf("rule %s writes text, not %s", r.Kind, c.typ)
		}
	case Hash:
		switch c.class {
		case classText:
			if c.limit > 0 && c.limit < r.Hex {
				return fmt.Sprintf("hash:%d does not fit %s: use hash:%d or less", r.Hex, c.typ, c.limit)
			}
		case classUUID, classInt8, classNumeric:
		default:
			return fmt.Sprintf("rule hash writes text, a uuid or a bigint, not %s (use number:MIN:MAX for a smaller integer)", c.typ)
		}
	case Number:
		switch c.class {
		case classInt2:
			if r.Min < -32768 || r.Max > 32767 {
				return fmt.Sprintf("number:%d:%d does not fit %s", r.Min, r.Max, c.typ)
			}
		case classInt4:
			if r.Min < -1<<31 || r.Max > 1<<31-1 {
				return fmt.Sprintf("number:%d:%d does not fit %s", r.Min, r.Max, c.typ)
			}
		case classInt8, classNumeric:
		default:
			return fmt.Sprintf("rule number writes an integer, not %s", c.typ)
		}
	case DateDays:
		if c.class != classDate {
			return fmt.Sprintf("rule dateshift moves a date, timestamp or timestamptz, not %s", c.typ)
		}
	case Null:
		if c.notNull {
			return "rule null on a NOT NULL column"
		}
	}
	if r.Kind == Regex && encoding != "UTF8" && encoding != "SQL_ASCII" {
		return fmt.Sprintf("rule regex reads UTF8 text; the database's encoding is %s (use hash, text or const)", encoding)
	}
	if r.Kind == Const && encoding != "UTF8" && !ascii(r.Value) {
		return fmt.Sprintf("const with characters beyond ASCII in a %s database: write the value in ASCII", encoding)
	}
	if c.unique && !uniqueRule(r, c) {
		return fmt.Sprintf("in a primary key or unique index: rule %s cannot keep it unique (use hash or email)", r.Text)
	}
	return ""
}

// uniqueRule says whether r's outputs are distinct for distinct inputs
// with overwhelming probability: 64 bits of keyed hash or more.
func uniqueRule(r Rule, c columnInfo) bool {
	switch r.Kind {
	case Email, Keep:
		return true
	case Hash:
		return c.class != classText || r.Hex >= 16
	}
	return false
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// castable says why value is not a value of type typ, or "": the cast
// runs in a savepoint, rolled back, so that a failure leaves conn's
// transaction (the dump's snapshot) usable.
func castable(ctx context.Context, conn *pgx.Conn, value, typ string) (string, error) {
	if _, err := conn.Exec(ctx, "SAVEPOINT pgsprint_mask"); err != nil {
		return "", fmt.Errorf("mask: check a const value: %w", err)
	}
	_, castErr := conn.Exec(ctx, fmt.Sprintf("SELECT CAST($1::text AS %s)", typ), value)
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT pgsprint_mask"); err != nil {
		return "", fmt.Errorf("mask: check a const value: %w", err)
	}
	if castErr != nil {
		var pgErr interface{ SQLState() string }
		if errors.As(castErr, &pgErr) {
			return fmt.Sprintf("const value is not a %s: %v", typ, castErr), nil
		}
		return "", fmt.Errorf("mask: check a const value: %w", castErr)
	}
	return "", nil
}

// fk is a foreign key with a side in a masked table.
type fk struct {
	name                  string
	child, parent         uint32
	childName, parentName string
	childCols, parentCols []int16
	childAtt, parentAtt   []string
}

func foreignKeys(ctx context.Context, conn *pgx.Conn, rels []uint32) ([]fk, error) {
	if len(rels) == 0 {
		return nil, nil
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i] < rels[j] })
	rows, err := conn.Query(ctx, `
		SELECT c.conname::text, c.conrelid, c.confrelid,
		       cn.nspname::text, cc.relname::text, pn.nspname::text, pc.relname::text,
		       c.conkey::int2[], c.confkey::int2[],
		       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, o) JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.o),
		       ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(n, o) JOIN pg_catalog.pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.o)
		FROM pg_catalog.pg_constraint c
		JOIN pg_catalog.pg_class cc ON cc.oid = c.conrelid JOIN pg_catalog.pg_namespace cn ON cn.oid = cc.relnamespace
		JOIN pg_catalog.pg_class pc ON pc.oid = c.confrelid JOIN pg_catalog.pg_namespace pn ON pn.oid = pc.relnamespace
		WHERE c.contype = 'f' AND (c.conrelid = ANY ($1::oid[]) OR c.confrelid = ANY ($1::oid[]))
		ORDER BY c.oid`, rels)
	if err != nil {
		return nil, fmt.Errorf("mask: read foreign keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fk, error) {
		var f fk
		var cs, cn, ps, pn string
		err := r.Scan(&f.name, &f.child, &f.parent, &cs, &cn, &ps, &pn, &f.childCols, &f.parentCols, &f.childAtt, &f.parentAtt)
		f.childName, f.parentName = pg.Qualified(cs, cn), pg.Qualified(ps, pn)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("mask: read foreign keys: %w", err)
	}
	return out, nil
}
