package filter

import (
	"fmt"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// Options are the selection flags of dump and restore, as pg_dump's:
// what is selected (Selection), and how (StrictNames: how patterns must
// match; Objects: kinds of objects and clauses left out of whatever is
// selected).
type Options struct {
	Selection
	// StrictNames, as pg_dump's --strict-names, requires each -n and -t
	// pattern to match something.
	StrictNames bool
	// Objects leave kinds of objects or clauses out of the schema.
	Objects Objects
}

// Selection is what dump, restore and clone take of a database: pg_dump's
// patterns and the parts (--schema-only, --data-only, --section). The zero
// Selection takes everything.
type Selection struct {
	Schemas          []string // -n
	ExcludeSchemas   []string // -N
	Tables           []string // -t
	ExcludeTables    []string // -T
	ExcludeTableData []string // --exclude-table-data
	SchemaOnly       bool
	DataOnly         bool
	// KeepStatistics keeps the optimizer statistics in a SchemaOnly or
	// DataOnly selection: pg_dump 18's --no-data and --no-schema leave
	// out only that one part, where --schema-only and --data-only leave
	// the statistics out too.
	KeepStatistics bool
	// StatisticsOnly takes the optimizer statistics alone (pg_dump 18's
	// --statistics-only): no schema, no rows, into existing tables.
	StatisticsOnly bool
	// SequenceData keeps the sequences' values in a SchemaOnly or
	// StatisticsOnly selection (pg_dump's --sequence-data).
	SequenceData bool
	// IncludeLargeObjects and ExcludeLargeObjects are pg_dump's -b and -B:
	// large objects even when -n or -t narrows the dump, or never (-b
	// wins when both are given, as in pg_dump).
	IncludeLargeObjects bool
	ExcludeLargeObjects bool
	// NoUnloggedTableData leaves out the rows of unlogged tables, keeping
	// their definitions (pg_dump's --no-unlogged-table-data).
	NoUnloggedTableData bool

	// TableAndChildren, ExcludeTableAndChildren and
	// ExcludeTableDataAndChildren are pg_dump 16's --table-and-children,
	// --exclude-table-and-children and --exclude-table-data-and-children:
	// -t, -T and --exclude-table-data for the matching tables and every
	// table that inherits from them (partitions included). They need a
	// live catalog: Expand turns them into exact names.
	TableAndChildren            []string
	ExcludeTableAndChildren     []string
	ExcludeTableDataAndChildren []string
	// Extensions and ExcludeExtensions are pg_dump's -e/--extension and
	// --exclude-extension (PostgreSQL 17), passed to pg_dump for the schema.
	Extensions        []string
	ExcludeExtensions []string
	// Sections, when not empty, are the pg_dump --section values the
	// archive's schema is limited to ("pre-data", "post-data").
	Sections []string
}

// Objects are the pg_dump and pg_restore flags that leave kinds of schema
// objects, or clauses of their definitions, out. The same flag means the
// same in both, so each is passed to whichever of them writes the SQL.
type Objects struct {
	NoComments          bool // --no-comments
	NoPublications      bool // --no-publications
	NoSubscriptions     bool // --no-subscriptions
	NoSecurityLabels    bool // --no-security-labels
	NoTablespaces       bool // --no-tablespaces (pg_restore only: pg_dump ignores it for archives)
	NoTableAccessMethod bool // --no-table-access-method (pg_restore only, likewise)
	NoToastCompression  bool // --no-toast-compression (pg_dump only: the clause is part of the table's definition)
	NoPolicies          bool // --no-policies (pg_dump and pg_restore 18)
}

// Active says whether any -n/-N/-t/-T/--exclude-table-data pattern was
// given: relations are then matched one by one.
func (o Selection) Active() bool {
	return len(o.Schemas)+len(o.ExcludeSchemas)+len(o.Tables)+len(o.ExcludeTables)+len(o.ExcludeTableData) > 0
}

// Partial says whether anything is selected rather than the whole
// database: a pattern (Active), --schema-only or --data-only.
func (o Selection) Partial() bool {
	return o.Active() || o.SchemaOnly || o.DataOnly || o.StatisticsOnly
}

// LargeObjects says whether large objects are dumped: pg_dump leaves them
// out when -n or -t narrows the dump (unless -b), with -B, and with
// --schema-only or --statistics-only.
func (o Selection) LargeObjects() bool {
	switch {
	case o.SchemaOnly || o.StatisticsOnly:
		return false
	case o.IncludeLargeObjects:
		return true
	}
	return len(o.Schemas) == 0 && len(o.Tables) == 0 && !o.ExcludeLargeObjects
}

// NoRows says whether no table rows are taken: --schema-only, --no-data
// or --statistics-only.
func (o Selection) NoRows() bool { return o.SchemaOnly || o.StatisticsOnly }

// Statistics says whether the selection takes optimizer statistics (when
// there are any): not with --schema-only or --data-only, which leave them
// out as pg_dump's do, but with --no-data, --no-schema and
// --statistics-only.
func (o Selection) Statistics() bool {
	return o.StatisticsOnly || o.KeepStatistics || (!o.SchemaOnly && !o.DataOnly)
}

// PgDumpArgs passes the same selection to pg_dump --schema-only, whose
// flags take the same patterns, and the object flags. Expand must have run
// (pg_dump gets the exact names), and CheckPgDump.
func (o Options) PgDumpArgs() []string {
	var a []string
	for _, f := range []struct {
		flag string
		pats []string
	}{{"--schema=", o.Schemas}, {"--exclude-schema=", o.ExcludeSchemas}, {"--table=", o.Tables}, {"--exclude-table=", o.ExcludeTables},
		{"--extension=", o.Extensions}, {"--exclude-extension=", o.ExcludeExtensions}, {"--section=", o.Sections}} {
		for _, p := range f.pats {
			a = append(a, f.flag+p)
		}
	}
	if o.StrictNames {
		a = append(a, "--strict-names")
	}
	ob := o.Objects
	for _, f := range []struct {
		on   bool
		flag string
	}{{ob.NoComments, "--no-comments"}, {ob.NoPublications, "--no-publications"}, {ob.NoSubscriptions, "--no-subscriptions"},
		{ob.NoSecurityLabels, "--no-security-labels"}, {ob.NoToastCompression, "--no-toast-compression"}, {ob.NoPolicies, "--no-policies"}} {
		if f.on {
			a = append(a, f.flag)
		}
	}
	return a
}

// CheckPgDump refuses, before any work, flags the pg_dump of version major
// that will dump the schema does not have.
func (o Options) CheckPgDump(major int) error {
	switch {
	case len(o.ExcludeExtensions) > 0 && major < 17:
		return fmt.Errorf("--exclude-extension needs pg_dump 17 or later, and this source is dumped with pg_dump %d", major)
	case len(o.Extensions) > 0 && major < 14:
		return fmt.Errorf("--extension needs pg_dump 14 or later, and this source is dumped with pg_dump %d", major)
	case o.Objects.NoToastCompression && major < 14:
		return fmt.Errorf("--no-toast-compression needs pg_dump 14 or later, and this source is dumped with pg_dump %d", major)
	case o.Objects.NoPolicies && major < 18:
		return fmt.Errorf("--no-policies needs pg_dump 18 or later, and this source is dumped with pg_dump %d", major)
	case o.StatisticsOnly && major < 18:
		return fmt.Errorf("--statistics-only needs pg_dump 18 or later (statistics are dumped from PostgreSQL 18 on), and this source is dumped with pg_dump %d", major)
	}
	return nil
}

// CheckPgRestore refuses, before any work, flags the pg_restore of
// version major that will restore the schema does not have.
func (o Options) CheckPgRestore(major int) error {
	if o.Objects.NoPolicies && major < 18 {
		return fmt.Errorf("--no-policies needs pg_restore 18 or later, and this restore runs pg_restore %d", major)
	}
	return nil
}

// PgRestoreArgs are the object flags for a pg_restore of the schema (of
// any version pgsprint runs; --no-table-access-method needs 15).
func (o Options) PgRestoreArgs() []string {
	var a []string
	ob := o.Objects
	for _, f := range []struct {
		on   bool
		flag string
	}{{ob.NoComments, "--no-comments"}, {ob.NoPublications, "--no-publications"}, {ob.NoSubscriptions, "--no-subscriptions"},
		{ob.NoSecurityLabels, "--no-security-labels"}, {ob.NoTablespaces, "--no-tablespaces"}, {ob.NoTableAccessMethod, "--no-table-access-method"},
		{ob.NoPolicies, "--no-policies"}} {
		if f.on {
			a = append(a, f.flag)
		}
	}
	return a
}

// Check parses every pattern, for a usage error before any work.
func (o Options) Check() error {
	switch {
	case o.SchemaOnly && o.DataOnly:
		return fmt.Errorf("--schema-only and --data-only cannot be used together")
	case o.StatisticsOnly && (o.SchemaOnly || o.DataOnly):
		return fmt.Errorf("--statistics-only cannot be used with --schema-only or --data-only")
	}
	for _, set := range [][]string{o.TableAndChildren, o.ExcludeTableAndChildren, o.ExcludeTableDataAndChildren} {
		for _, t := range set {
			if _, err := Parse(t); err != nil {
				return err
			}
		}
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

// Conditions returns Selected's condition and the one for
// --exclude-table-data, from one reading of the patterns: what a query
// of the rows to copy needs.
func (o Options) Conditions(c, n string) (selected, noData string, err error) {
	conds, err := o.conditions(c, n)
	return conds.selected, conds.noData, err
}

type conditions struct{ selected, noData string }

func (o Options) conditions(c, n string) (conditions, error) {
	any := func(texts []string, schema bool) (string, error) {
		var ors []string
		for _, t := range texts {
			p, err := parse(t, schema)
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
	conds, err := eachList(o, any)
	if err != nil {
		return out, err
	}
	incT, excT, incN, excN := conds[0], conds[1], conds[2], conds[3]
	out.noData = conds[4]
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
