package toc

import (
	"reflect"
	"sort"
	"testing"
)

// TestSelect checks what comes with a selected table, on the entries of
// a real pg_dump archive (two schemas, a foreign key between them, a
// serial and an identity column, a view, a comment, an index).
func TestSelect(t *testing.T) {
	entries := []Entry{
		{ID: 6, Type: "SCHEMA"},
		{ID: 7, Type: "SCHEMA"},
		{ID: 222, Type: "FUNCTION", Deps: []int{6}},
		{ID: 221, Type: "TABLE"},
		{ID: 217, Type: "TABLE", Deps: []int{6}},
		{ID: 3370, Type: "COMMENT", Deps: []int{217}},
		{ID: 216, Type: "SEQUENCE", Deps: []int{217, 6}},
		{ID: 3371, Type: "SEQUENCE OWNED BY", Deps: []int{216}},
		{ID: 220, Type: "VIEW", Deps: []int{217, 217, 6}},
		{ID: 219, Type: "TABLE", Deps: []int{7}},
		{ID: 218, Type: "SEQUENCE", Deps: []int{219, 7}},
		{ID: 3213, Type: "DEFAULT", Deps: []int{217, 216, 217}},
		{ID: 3215, Type: "CONSTRAINT", Deps: []int{217}},
		{ID: 3218, Type: "CONSTRAINT", Deps: []int{219}},
		{ID: 3216, Type: "INDEX", Deps: []int{217}},
		{ID: 3219, Type: "FK CONSTRAINT", Deps: []int{219, 3215, 217}},
		{ID: 3400, Type: "COMMENT", Deps: []int{3219}},
	}
	for _, tc := range []struct {
		name                      string
		include, exclude, present []int
		want, dropped             []int
	}{
		{"table brings its parts, not its view", []int{217}, nil, nil, []int{216, 217, 3213, 3215, 3216, 3370, 3371}, []int{3219}},
		{"foreign key needs both sides", []int{219}, nil, nil, []int{218, 219, 3218}, []int{3219}},
		{"other side already in the target", []int{219}, nil, []int{217}, []int{218, 219, 3218, 3219, 3400}, nil},
		{"both sides", []int{217, 219}, nil, nil, []int{216, 217, 218, 219, 3213, 3215, 3216, 3218, 3219, 3370, 3371, 3400}, nil},
		{"exclude wins", []int{217, 219, 221}, []int{217}, nil, []int{218, 219, 221, 3218}, []int{3219}},
		{"schema members minus a table", []int{6, 222, 217, 216, 220}, []int{217}, nil, []int{6, 220, 222}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, dropped := Select(entries, set(tc.include), set(tc.exclude), set(tc.present))
			if ids := keys(got); !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("chosen %v, want %v", ids, tc.want)
			}
			var d []int
			for _, e := range dropped {
				d = append(d, e.ID)
			}
			if !reflect.DeepEqual(d, tc.dropped) {
				t.Errorf("dropped %v, want %v", d, tc.dropped)
			}
		})
	}
}

func set(ids []int) map[int]bool {
	m := map[int]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func keys(m map[int]bool) []int {
	var out []int
	for id := range m {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

func TestAlteredTable(t *testing.T) {
	for _, tc := range []struct{ sql, schema, name string }{
		{"ALTER TABLE ONLY app.orders\n    ADD CONSTRAINT f FOREIGN KEY (c) REFERENCES app.customers(id);", "app", "orders"},
		{`ALTER TABLE "we""ird` + "\n" + `sch"."t; drop" ADD CONSTRAINT x CHECK (true);`, "we\"ird\nsch", "t; drop"},
		{"ALTER TABLE IF EXISTS ONLY s.t DROP CONSTRAINT c;", "", ""},
		{"CREATE INDEX i ON s.t (c);", "", ""},
	} {
		s, n, ok := AlteredTable(tc.sql)
		if s != tc.schema || n != tc.name || ok != (tc.name != "") {
			t.Errorf("AlteredTable(%q) = %q, %q, %v", tc.sql, s, n, ok)
		}
	}
}
