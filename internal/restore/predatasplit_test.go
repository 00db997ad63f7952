package restore

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// TestSplitPreData splits tables of contents shaped as pg_dump writes them
// (dump IDs, types, classes and dependencies as in `pg_restore --verbose`)
// and checks each step's runs: levels in order, entries that could wait on
// each other's locks in one run, the database's entries first with
// --create, privileges last, and one run (nil) for small schemas.
func TestSplitPreData(t *testing.T) {
	const (
		schema   = 2615
		table    = relationClass
		function = 1255
		typ      = typeClass
	)
	e := func(id int, kind string, class uint32, name string, deps ...int) toc.Entry {
		return toc.Entry{ID: id, Type: kind, Class: class, OID: uint32(id), Name: name, Schema: "public", Deps: deps}
	}
	tables := func(from, n int, deps ...int) []toc.Entry {
		var out []toc.Entry
		for i := range n {
			out = append(out, e(from+i, "TABLE", table, fmt.Sprintf("t%d", from+i), deps...))
		}
		return out
	}
	cat := func(parts ...[]toc.Entry) []toc.Entry { return slices.Concat(parts...) }
	one := func(es ...toc.Entry) []toc.Entry { return es }

	for _, tc := range []struct {
		name    string
		entries []toc.Entry
		jobs    int
		min     int
		create  bool
		want    string // steps joined by " | "; a step's runs in brackets
	}{
		{name: "small schema: one run", entries: tables(1, 5), jobs: 4, min: 200, want: "one run"},
		{name: "one connection: one run", entries: tables(1, 10), jobs: 1, min: 2, want: "one run"},
		{name: "independent tables", entries: tables(1, 6), jobs: 2, min: 4,
			want: "[1 3 5][2 4 6]"},
		{name: "more connections than groups", entries: tables(1, 3), jobs: 8, min: 2,
			want: "[1][2][3]"},
		{
			name: "levels: schema, tables, comments, then privileges",
			entries: cat(one(e(1, "SCHEMA", schema, "app")), tables(10, 4, 1),
				one(e(20, "COMMENT", 0, "TABLE t10", 10), e(21, "COMMENT", 0, "TABLE t11", 11), e(22, "COMMENT", 0, "TABLE t12", 12),
					e(30, "ACL", 0, "TABLE t10", 10), e(31, "DEFAULT ACL", 0, "DEFAULT PRIVILEGES FOR TABLES", 1))),
			jobs: 2, min: 3,
			want: "[1] | [10 12][11 13] | [20 22][21] | [30 31]",
		},
		{
			// A column's privileges depend on its table's: a level after.
			name: "many privileges: split too, after everything else",
			entries: cat(tables(1, 4), one(e(20, "ACL", 0, "TABLE t1", 1), e(21, "ACL", 0, "TABLE t2", 2), e(22, "ACL", 0, "TABLE t3", 3),
				e(23, "ACL", 0, "COLUMN t3.a", 3, 22), e(24, "DEFAULT ACL", 0, "DEFAULT PRIVILEGES FOR TABLES"))),
			jobs: 2, min: 3,
			want: "[1 3][2 4] | [20 22][21 24] | [23]",
		},
		{
			name: "small levels around a big one share runs",
			entries: cat(one(e(1, "SCHEMA", schema, "app"), e(2, "FUNCTION", function, "f()", 1)), tables(10, 4, 1, 2),
				one(e(20, "VIEW", table, "v", 10, 11), e(21, "COMMENT", 0, "VIEW v", 20))),
			jobs: 2, min: 4,
			want: "[1 2] | [10 12][11 13] | [20 21]",
		},
		{
			// Children of one parent (inheritance or partitions, with
			// their ATTACH), a table's comments, default and sequence
			// OWNED BY: each set depends on one relation, so it waits on
			// that relation's locks, and stays on one connection.
			name: "entries on one relation share a run",
			entries: cat(tables(1, 4),
				tables(10, 3, 1), // children of t1
				one(e(20, "SEQUENCE", table, "s20"),
					e(21, "COMMENT", 0, "TABLE t2", 2), e(22, "COMMENT", 0, "COLUMN t2.a", 2),
					e(23, "SEQUENCE OWNED BY", 0, "s20", 20, 3), e(24, "DEFAULT", 2604, "t3 id", 3, 20),
					e(25, "COMMENT", 0, "TABLE t4", 4)),
				one(e(30, "TABLE ATTACH", 0, "t10", 10, 1), e(31, "TABLE ATTACH", 0, "t11", 11, 1), e(32, "COMMENT", 0, "TABLE t10", 10))),
			jobs: 8, min: 3,
			want: "[1][2][3][4][20] | [10 11 12][21 22][23 24][25] | [30 31 32]",
		},
		{
			// A schema, a type or a function many tables use takes no
			// lock that others wait for: it does not join them.
			name: "shared schema, type and function do not join",
			entries: cat(one(e(1, "SCHEMA", schema, "app"), e(2, "TYPE", typ, "mood", 1), e(3, "FUNCTION", function, "f()", 1)),
				tables(10, 4, 1, 2, 3),
				one(e(20, "COMMENT", 0, "TYPE mood", 2), e(21, "ACL", 0, "TYPE mood", 2))),
			jobs: 2, min: 4,
			want: "[1 2 3] | [10 12 20][11 13] | [21]",
		},
		{
			// "t" makes array type "_t", the name table "_t" wants: never
			// created at once. Other schemas, other names.
			name: "colliding array type names share a run",
			entries: one(e(1, "TABLE", table, "t"), e(2, "TABLE", table, "_t"), e(3, "TABLE", table, "__t"),
				toc.Entry{ID: 4, Type: "TABLE", Class: table, Name: "_t", Schema: "other"}, e(5, "TABLE", table, "u"),
				e(6, "TYPE", typ, "_u"), e(7, "TABLE", table, strings.Repeat("x", 45)+"1"), e(8, "TABLE", table, strings.Repeat("x", 45)+"2")),
			jobs: 4, min: 2,
			want: "[1 2 3][4][5 6][7 8]",
		},
		{
			name:    "all children of one parent: one run",
			entries: cat(tables(1, 1), tables(10, 5, 1)),
			jobs:    2, min: 2, want: "one run",
		},
		{
			name: "--create: the database's entries first, in the creating run",
			entries: cat(one(e(1, "DATABASE", 1262, "db"), e(2, "DATABASE PROPERTIES", 0, "db", 1), e(3, "COMMENT", 0, "DATABASE db", 1),
				e(4, "ACL", 0, "DATABASE db", 1)), tables(10, 4)),
			jobs: 2, min: 4, create: true,
			want: "create[1 2 3 4] | [10 12][11 13]",
		},
		{
			name:    "--create with a small first level: it joins the creating run",
			entries: cat(one(e(1, "DATABASE", 1262, "db"), e(2, "SCHEMA", schema, "app")), tables(10, 4, 2)),
			jobs:    2, min: 4, create: true,
			want: "create[1 2] | [10 12][11 13]",
		},
		{
			name:    "--create without the database entry: one run",
			entries: tables(1, 4), jobs: 2, min: 2, create: true, want: "one run",
		},
		{
			name:    "without --create the database's entries are left out, as pg_restore does",
			entries: cat(one(e(1, "DATABASE", 1262, "db"), e(3, "COMMENT", 0, "DATABASE db", 1)), tables(10, 4)),
			jobs:    2, min: 4,
			want: "[10 12][11 13]",
		},
		{
			name:    "a dependency cycle: one run",
			entries: cat(one(e(1, "TABLE", table, "a", 2), e(2, "TABLE", table, "b", 1)), tables(10, 4)),
			jobs:    2, min: 2, want: "one run",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []int
			for _, x := range tc.entries {
				order = append(order, x.ID)
			}
			slices.Sort(order) // the archive's order: here, by dump ID
			// Privileges come last in pg_restore's script, whatever their
			// place in the archive: the plan must not care.
			entries := slices.Clone(tc.entries)
			slices.SortStableFunc(entries, func(a, b toc.Entry) int {
				return boolInt(lastPass(&a)) - boolInt(lastPass(&b))
			})
			got := formatSteps(splitPreData(entries, order, preDataSplitOptions{jobs: tc.jobs, splitMin: tc.min, create: tc.create}))
			if got != tc.want {
				t.Errorf("plan\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// formatSteps writes steps as "[1 2][3] | [4]" (runs by their first dump
// ID), "create" before the creating step, "one run" for nil.
func formatSteps(steps []preDataStep) string {
	if steps == nil {
		return "one run"
	}
	var out []string
	for _, s := range steps {
		runs := slices.Clone(s.runs)
		slices.SortFunc(runs, func(a, b []int) int { return a[0] - b[0] })
		var b strings.Builder
		if s.create {
			b.WriteString("create")
		}
		for _, r := range runs {
			fmt.Fprintf(&b, "%v", r)
		}
		out = append(out, b.String())
	}
	return strings.Join(out, " | ")
}
