package filter

import (
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestMatch checks restore-side selection on an archive's names: the
// same rules as pg_dump's, evaluated without a catalog.
func TestMatch(t *testing.T) {
	schemas := []string{"public", "app", "We\"ird\nschema", "audit"}
	rels := []Rel{
		{"public", "orders"}, {"public", "order_items"}, {"public", "Orders"},
		{"app", "orders"}, {"app", "users"},
		{"We\"ird\nschema", "t; drop"}, {"audit", "log"},
	}
	for _, tc := range []struct {
		name    string
		opts    Options
		schemas string // sorted, comma separated
		rels    string
		err     string
	}{
		{"everything", Options{}, "We\"ird\nschema,app,audit,public", "We\"ird\nschema.t; drop,app.orders,app.users,audit.log,public.Orders,public.order_items,public.orders", ""},
		{"unqualified matches every schema", Options{Selection: Selection{Tables: []string{"orders"}}}, "", "app.orders,public.orders", ""},
		{"quoted keeps case", Options{Selection: Selection{Tables: []string{`"Orders"`}}}, "", "public.Orders", ""},
		{"wildcard", Options{Selection: Selection{Tables: []string{"public.order*"}}}, "", "public.order_items,public.orders", ""},
		{"question mark", Options{Selection: Selection{Tables: []string{"?pp.users"}}}, "", "app.users", ""},
		{"hostile names", Options{Selection: Selection{Tables: []string{"\"We\"\"ird\nschema\".\"t; drop\""}}}, "", "We\"ird\nschema.t; drop", ""},
		{"schema", Options{Selection: Selection{Schemas: []string{"app"}}}, "app", "app.orders,app.users", ""},
		{"schema minus table", Options{Selection: Selection{Schemas: []string{"app"}, ExcludeTables: []string{"users"}}}, "app", "app.orders", ""},
		{"exclude schema", Options{Selection: Selection{ExcludeSchemas: []string{"public", "a*"}}}, "We\"ird\nschema", "We\"ird\nschema.t; drop", ""},
		{"-t ignores -n", Options{Selection: Selection{Schemas: []string{"app"}, Tables: []string{"audit.log"}}}, "", "audit.log", ""},
		{"three-part name", Options{Selection: Selection{Tables: []string{"shop.app.users"}}}, "", "app.users", ""},
		{"other database", Options{Selection: Selection{Tables: []string{"other.app.users"}}}, "", "", "cross-database references are not implemented: other.app.users"},
		{"exclude table data keeps the table", Options{Selection: Selection{Schemas: []string{"app"}, ExcludeTableData: []string{"app.users"}}}, "app", "app.orders,app.users", ""},
		{"no match", Options{Selection: Selection{Tables: []string{"nope"}}}, "", "", "no matching tables were found"},
		{"no schema match", Options{Selection: Selection{Schemas: []string{"nope"}}}, "", "", "no matching schemas were found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.opts.Match("shop", schemas, rels)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var gotS, gotR []string
			for s := range m.Schemas {
				gotS = append(gotS, s)
			}
			for r := range m.Relations {
				gotR = append(gotR, r.Schema+"."+r.Name)
			}
			sort.Strings(gotS)
			sort.Strings(gotR)
			if want := split(tc.schemas); !reflect.DeepEqual(gotS, want) {
				t.Errorf("schemas %q, want %q", gotS, want)
			}
			if want := split(tc.rels); !reflect.DeepEqual(gotR, want) {
				t.Errorf("relations %q, want %q", gotR, want)
			}
		})
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// TestPartial checks which selections take part of a database: a pattern,
// --schema-only or --data-only do; how patterns match (--strict-names)
// and which kinds of objects are left out (--no-comments) do not.
func TestPartial(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want bool
	}{
		{"nothing", Options{}, false},
		{"-t", Options{Selection: Selection{Tables: []string{"t"}}}, true},
		{"--exclude-table-data", Options{Selection: Selection{ExcludeTableData: []string{"t"}}}, true},
		{"--schema-only", Options{Selection: Selection{SchemaOnly: true}}, true},
		{"--data-only", Options{Selection: Selection{DataOnly: true}}, true},
		{"--strict-names alone", Options{StrictNames: true}, false},
		{"--no-comments alone", Options{Objects: Objects{NoComments: true}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.o.Partial(); got != tc.want {
				t.Errorf("Partial() = %v, want %v", got, tc.want)
			}
		})
	}
}
