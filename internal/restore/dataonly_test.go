package restore

import (
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// TestOrderLoads: --data-only loads wait for the tables they reference;
// what no order can satisfy is refused with a pointer to
// --disable-triggers.
func TestOrderLoads(t *testing.T) {
	k := func(n string) string { return taskgraph.TableKey("s", n) }
	for _, tc := range []struct {
		name  string
		loads map[string]int // table: chunks
		refs  map[string][]string
		deps  map[string][]string // table: tables its loads must wait for
		err   string
	}{
		{"chain", map[string]int{"a": 1, "b": 2, "c": 1}, map[string][]string{k("c"): {k("b")}, k("b"): {k("a")}},
			map[string][]string{"b": {"a"}, "c": {"b"}}, ""},
		{"reference to a table not loaded", map[string]int{"a": 1}, map[string][]string{k("a"): {k("zz")}}, nil, ""},
		{"self reference in one chunk", map[string]int{"tree": 1}, map[string][]string{k("tree"): {k("tree")}}, nil, ""},
		{"self reference in chunks", map[string]int{"tree": 3}, map[string][]string{k("tree"): {k("tree")}}, nil,
			`table "s"."tree" references itself and is loaded in 3 chunks`},
		{"cycle", map[string]int{"a": 1, "b": 1, "c": 1}, map[string][]string{k("a"): {k("b")}, k("b"): {k("c")}, k("c"): {k("a")}}, nil,
			"foreign keys form a cycle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &schedule.Graph{}
			loads := map[string][]int{}
			owner := map[int]string{}
			for table, n := range tc.loads {
				for range n {
					id := g.Add(&schedule.Task{Name: table, Kind: taskgraph.Data})
					loads[k(table)] = append(loads[k(table)], id)
					owner[id] = table
				}
			}
			err := orderLoads(g, loads, tc.refs)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--disable-triggers") {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for table := range tc.loads {
				waits := map[string]bool{}
				for _, id := range loads[k(table)] {
					for _, d := range g.Tasks[id].Deps {
						waits[owner[d]] = true
					}
				}
				want := map[string]bool{}
				for _, w := range tc.deps[table] {
					want[w] = true
				}
				if len(waits) != len(want) {
					t.Errorf("%s waits for %v, want %v", table, waits, want)
				}
				for w := range want {
					if !waits[w] {
						t.Errorf("%s does not wait for %s", table, w)
					}
				}
				// Every load of a referenced table, not just one.
				for _, id := range loads[k(table)] {
					n := 0
					for _, w := range tc.deps[table] {
						n += tc.loads[w]
					}
					if len(g.Tasks[id].Deps) != n {
						t.Errorf("%s: a load waits for %d loads, want %d", table, len(g.Tasks[id].Deps), n)
					}
				}
			}
		})
	}
}
