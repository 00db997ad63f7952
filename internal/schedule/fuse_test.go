package schedule

import (
	"slices"
	"strings"
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
		Locks: []Lock{{c, ShareRowExclusive}, {a, ShareRowExclusive}}})
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

// TestPlanSmallForeignKeys: a foreign key between two tables under
// SmallBytes is one task running pg_dump's checking statement; any other is
// added NOT VALID and validated apart; one an earlier run added NOT VALID
// (its step done) keeps both tasks, so that it is still validated; one NOT
// VALID in the source stays one unchecked task. fkSchema's tables a, b, c
// are 100, 200 and 300 bytes.
func TestPlanSmallForeignKeys(t *testing.T) {
	const checked, twoSteps, notValid = "checked", "NOT VALID + validate", "NOT VALID"
	for _, tc := range []struct {
		name  string
		small int64
		done  []string
		want  map[string]string // foreign key -> how it is added
	}{
		{"no small tables", 0, nil,
			map[string]string{"a a_b_fk": twoSteps, "b b_a_fk": twoSteps, "c c_c_fk": twoSteps, "c c_a_fk": notValid}},
		{"all small", 1000, nil,
			map[string]string{"a a_b_fk": checked, "b b_a_fk": checked, "c c_c_fk": checked, "c c_a_fk": notValid}},
		{"a and b small, c not", 250, nil,
			map[string]string{"a a_b_fk": checked, "b b_a_fk": checked, "c c_c_fk": twoSteps, "c c_a_fk": notValid}},
		{"size at the threshold is not small", 200, nil,
			map[string]string{"a a_b_fk": twoSteps, "b b_a_fk": twoSteps, "c c_c_fk": twoSteps, "c c_a_fk": notValid}},
		{"added NOT VALID by an earlier run", 1000, []string{"foreign key 130"},
			map[string]string{"a a_b_fk": twoSteps, "b b_a_fk": checked, "c c_c_fk": checked, "c c_a_fk": notValid}},
		{"validated by an earlier run", 1000, []string{"foreign key 130", "validate 130"},
			map[string]string{"a a_b_fk": twoSteps, "b b_a_fk": checked, "c c_c_fk": checked, "c c_a_fk": notValid}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := func(step string) bool { return slices.Contains(tc.done, step) }
			g, _, _ := planWith(t, 1, AccessExclusive, PlanOptions{SmallBytes: tc.small, Done: done})
			for fk, want := range tc.want {
				add := g.Tasks[find(t, g, "foreign key "+fk)]
				validate := slices.ContainsFunc(g.Tasks, func(tk *Task) bool { return tk.Name == "validate "+fk })
				var got string
				switch sql := strings.Join(add.SQL, "\n"); {
				case strings.Contains(sql, "NOT VALID") && validate:
					got = twoSteps
				case strings.Contains(sql, "NOT VALID"):
					got = notValid
				case !validate:
					got = checked
				default:
					got = "checked and validated again"
				}
				if got != want {
					t.Errorf("%s: %s, want %s", fk, got, want)
				}
				if slices.Contains(add.Locks, Lock{DDLMutex, AccessExclusive}) {
					t.Errorf("%s: added under DDLMutex: foreign keys between loaded tables run in parallel", fk)
				}
			}
		})
	}
}

// TestFuseAnalyzeOfTablesWithForeignKeys: planned and fused, a small
// table's ANALYZE joins its load even when the table has foreign keys (in
// either direction), after its index and constraint tasks; a large
// table's stays apart; the foreign keys stay apart.
func TestFuseAnalyzeOfTablesWithForeignKeys(t *testing.T) {
	g, _, _ := planWith(t, 1, AccessExclusive, PlanOptions{Analyze: true, SmallBytes: 250})
	f := FuseSmallTables(g, 250)
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		load string
		then []string // fused into the load, in order
	}{
		{"load a 0", []string{"constraint a a_pkey", "unique index a a_pkey", "constraint a a_excl", "index a_v_idx", "index a_w_idx", "index markers a_w_idx", "analyze public.a"}},
		{"load b 0", []string{"unique index b b_pkey", "constraint b b_pkey", "unique index b b_k_key", "constraint b b_k_key", "analyze public.b"}},
		{"load c 0", nil},
	} {
		var got []string
		for _, fu := range f.Tasks[find(t, f, tc.load)].Then {
			got = append(got, fu.Name)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.then))
		if !slices.Equal(got, want) {
			t.Errorf("fused into %s: %q, want %q", tc.load, got, want)
		}
		if n := len(f.Tasks[find(t, f, tc.load)].Then); n > 0 && f.Tasks[find(t, f, tc.load)].Then[n-1].Kind != Analyze {
			t.Errorf("%s: ANALYZE is not the last fused task", tc.load)
		}
	}
	for _, name := range []string{"foreign key a a_b_fk", "foreign key b b_a_fk", "analyze public.c", "unique index c c_pkey"} {
		find(t, f, name)
	}
}
