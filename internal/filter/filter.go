package filter

import (
	"fmt"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// Options are the selection flags of dump and restore, as pg_dump's.
type Options struct {
	Schemas          []string // -n
	ExcludeSchemas   []string // -N
	Tables           []string // -t
	ExcludeTables    []string // -T
	ExcludeTableData []string // --exclude-table-data
	SchemaOnly       bool
	DataOnly         bool
}

// Active says whether any selection was asked for.
func (o Options) Active() bool {
	return len(o.Schemas)+len(o.ExcludeSchemas)+len(o.Tables)+len(o.ExcludeTables)+len(o.ExcludeTableData) > 0
}

// LargeObjects says whether large objects are dumped: pg_dump leaves them
// out when -n or -t narrows the dump, and with --schema-only.
func (o Options) LargeObjects() bool {
	return len(o.Schemas) == 0 && len(o.Tables) == 0 && !o.SchemaOnly
}

// PgDumpArgs passes the same selection to pg_dump --schema-only, whose
// flags take the same patterns.
func (o Options) PgDumpArgs() []string {
	var a []string
	for _, f := range []struct {
		flag string
		pats []string
	}{{"--schema=", o.Schemas}, {"--exclude-schema=", o.ExcludeSchemas}, {"--table=", o.Tables}, {"--exclude-table=", o.ExcludeTables}} {
		for _, p := range f.pats {
			a = append(a, f.flag+p)
		}
	}
	return a
}

// Check parses every pattern, for a usage error before any work.
func (o Options) Check() error {
	if o.SchemaOnly && o.DataOnly {
		return fmt.Errorf("--schema-only and --data-only cannot be used together")
	}
	_, err := o.conditions("c", "n")
	return err
}

// Selected returns an SQL condition on pg_class c joined to pg_namespace n
// that is true for the relations pg_dump would dump with these options:
// with -t only the matching relations, else those in schemas matching -n
// (all when none) and no -N; never those matching -T.
func (o Options) Selected(c, n string) (string, error) {
	conds, err := o.conditions(c, n)
	if err != nil {
		return "", err
	}
	return conds.selected, nil
}

// DataExcluded returns the condition for --exclude-table-data.
func (o Options) DataExcluded(c, n string) (string, error) {
	conds, err := o.conditions(c, n)
	if err != nil {
		return "", err
	}
	return conds.noData, nil
}

type conditions struct{ selected, noData string }

func (o Options) conditions(c, n string) (conditions, error) {
	any := func(texts []string, schema bool) (string, error) {
		var ors []string
		for _, t := range texts {
			var p Pattern
			var err error
			if schema {
				p, err = ParseSchema(t)
			} else {
				p, err = Parse(t)
			}
			if err != nil {
				return "", err
			}
			ors = append(ors, "("+p.sql(c, n)+")")
		}
		if len(ors) == 0 {
			return "false", nil
		}
		return strings.Join(ors, " OR "), nil
	}
	var out conditions
	incT, err := any(o.Tables, false)
	if err != nil {
		return out, err
	}
	excT, err := any(o.ExcludeTables, false)
	if err != nil {
		return out, err
	}
	incN, err := any(o.Schemas, true)
	if err != nil {
		return out, err
	}
	excN, err := any(o.ExcludeSchemas, true)
	if err != nil {
		return out, err
	}
	if out.noData, err = any(o.ExcludeTableData, false); err != nil {
		return out, err
	}
	var sel string
	switch {
	case len(o.Tables) > 0:
		sel = incT
	case len(o.Schemas) > 0:
		sel = fmt.Sprintf("(%s) AND NOT (%s)", incN, excN)
	default:
		sel = fmt.Sprintf("NOT (%s)", excN)
	}
	out.selected = fmt.Sprintf("(%s) AND NOT (%s)", sel, excT)
	return out, nil
}

// sql matches the pattern against relation c in namespace n, as pg_dump's
// query does: regular expressions under the default collation, and
// visibility in the search path for a pattern without a schema.
func (p Pattern) sql(c, n string) string {
	var conds []string
	match := func(col, re string) string {
		return fmt.Sprintf("%s OPERATOR(pg_catalog.~) %s COLLATE pg_catalog.default", col, pg.Literal(re))
	}
	if p.Schema != "" && p.Schema != "^(.*)$" {
		conds = append(conds, match(n+".nspname", p.Schema))
	}
	if p.Name != "" {
		if p.Name != "^(.*)$" {
			conds = append(conds, match(c+".relname", p.Name))
		}
		if p.Schema == "" {
			conds = append(conds, "pg_catalog.pg_table_is_visible("+c+".oid)")
		}
	}
	if len(conds) == 0 {
		return "true"
	}
	return strings.Join(conds, " AND ")
}
