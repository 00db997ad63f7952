package schedule

import (
	"slices"
	"testing"
)

// TestFuseSmallTables: a small table's index, constraint and ANALYZE tasks
// join its load, in order; a large table's and the foreign key's stay apart,
// with their dependencies moved to the loads; what waits for a foreign key
// (its tables' ANALYZE) is not fused.
func TestFuseSmallTables(t *testing.T) {
	g := &Graph{}
	a, b, c := TableKey("s", "a"), TableKey("s", "b"), TableKey("s", "c")
	load := func(key string, cost int64) int {
		return g.Add(&Task{Name: "load " + key, Kind: Data, Cost: cost, Table: key, Step: "chunk " + key, Locks: []Lock{{key, AccessExclusive}}})
	}
	task := func(name string, kind Kind, key string, mode LockMode, deps ...int) int {
		return g.Add(&Task{Name: name, Kind: kind, Step: name, SQL: []string{name}, Locks: []Lock{{key, mode}}, Deps: deps})
	}
	la, lb, lc := load(a, 100), load(b, 10<<20), load(c, 100)
	ua := task("unique a", Index, a, Share, la)
	ka := task("constraint a", Constraint, a, AccessExclusive, la, ua)
	ia := task("index a", Index, a, Share, la)
	ib := task("index b", Index, b, Share, lb)
	ic := task("index c", Index, c, Share, lc)
	fk := g.Add(&Task{Name: "fk c a", Kind: ForeignKey, SQL: []string{"fk"}, Deps: []int{lc, la, ic, ua, ka},
		Locks: []Lock{{c, ShareRowExclusive}, {a, ShareRowExclusive}, {DDLMutex, AccessExclusive}}})
	aa := task("analyze a", Analyze, a, ShareUpdateExclusive, la, ua, ka, ia)
	ac := task("analyze c", Analyze, c, ShareUpdateExclusive, lc, ic, fk)
	g.Add(&Task{Name: "rest", Kind: Rest, Deps: []int{ua, ka, ia, ib, ic, fk, aa, ac}, Locks: []Lock{{DDLMutex, AccessExclusive}}})

	f := FuseSmallTables(g, 1<<20)
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Task{}
	var names []string
	for _, tk := range f.Tasks {
		byName[tk.Name] = tk
		names = append(names, tk.Name)
	}
	if want := []string{"load " + a, "load " + b, "load " + c, "index b", "fk c a", "analyze c", "rest"}; !slices.Equal(names, want) {
		t.Fatalf("tasks %q, want %q", names, want)
	}
	then := func(key string) []string {
		var out []string
		for _, fu := range byName["load "+key].Then {
			out = append(out, fu.Name)
		}
		return out
	}
	if got, want := then(a), []string{"unique a", "constraint a", "index a", "analyze a"}; !slices.Equal(got, want) {
		t.Errorf("fused into a's load: %q, want %q", got, want)
	}
	if got, want := then(c), []string{"index c"}; !slices.Equal(got, want) {
		t.Errorf("fused into c's load: %q, want %q", got, want)
	}
	if got := then(b); got != nil {
		t.Errorf("a large table's tasks were fused: %q", got)
	}
	deps := func(name string) []string {
		var out []string
		for _, d := range byName[name].Deps {
			out = append(out, f.Tasks[d].Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := deps("fk c a"), []string{"load " + a, "load " + c}; !slices.Equal(got, want) {
		t.Errorf("foreign key depends on %q, want %q", got, want)
	}
	if got, want := deps("analyze c"), []string{"fk c a", "load " + c}; !slices.Equal(got, want) {
		t.Errorf("analyze c depends on %q, want %q", got, want)
	}
	if f != g {
		t.Error("FuseSmallTables copied the graph instead of changing it in place")
	}
}

// TestRemap checks the in-place mapping of a task's dependencies: order
// kept, repeats (also those the mapping makes) left out, on both sides of
// the length from which it uses a map.
func TestRemap(t *testing.T) {
	long := make([]int, 40)
	for i := range long {
		long[i] = i
	}
	for _, tc := range []struct {
		name string
		deps []int
		f    func(int) int
		want []int
	}{
		{"empty", nil, func(d int) int { return d }, []int{}},
		{"identity", []int{3, 1, 2}, func(d int) int { return d }, []int{3, 1, 2}},
		{"repeats made by the mapping", []int{1, 2, 3, 4}, func(d int) int { return d / 2 }, []int{0, 1, 2}},
		{"repeats given", []int{5, 5, 7, 5}, func(d int) int { return d }, []int{5, 7}},
		{"long", long, func(d int) int { return d % 3 }, []int{0, 1, 2}},
	} {
		if got := remap(tc.deps, tc.f); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
