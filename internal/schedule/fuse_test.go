package schedule

import (
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

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
		{"long with negative tasks, kept", long, func(d int) int {
			if d == 5 || d == 7 {
				return -1
			}
			return d % 2
		}, []int{0, 1, -1, -1}},
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
			g, _, _ := planWith(t, 1, taskgraph.AccessExclusive, PostDataOptions{SmallBytes: tc.small, Done: done})
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
				if slices.Contains(add.Locks, taskgraph.Lock{Key: taskgraph.DDLMutex, Mode: taskgraph.AccessExclusive}) {
					t.Errorf("%s: added under DDLMutex: foreign keys between loaded tables run in parallel", fk)
				}
			}
		})
	}
}

// TestFuseAnalyzeOfTablesWithForeignKeys: planned with FuseBytes, a small
// table's index, constraint and ANALYZE tasks join its load, ANALYZE last,
// even when the table has foreign keys (in either direction); a large
// table's stay apart, and so do the foreign keys, which depend on the
// loads their tables' fused tasks joined.
func TestFuseAnalyzeOfTablesWithForeignKeys(t *testing.T) {
	f, _, _ := planWith(t, 1, taskgraph.AccessExclusive, PostDataOptions{Analyze: true, SmallBytes: 250, FuseBytes: 250})
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
		then := f.Tasks[find(t, f, tc.load)].Then
		var got []string
		for i := range then {
			got = append(got, then[i].Name())
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.then))
		if !slices.Equal(got, want) {
			t.Errorf("fused into %s: %q, want %q", tc.load, got, want)
		}
		if n := len(then); n > 0 && then[n-1].Kind != taskgraph.Analyze {
			t.Errorf("%s: ANALYZE is not the last fused task", tc.load)
		}
	}
	for _, name := range []string{"foreign key a a_b_fk", "foreign key b b_a_fk", "analyze public.c", "unique index c c_pkey"} {
		find(t, f, name)
	}
	var deps []string
	for _, d := range f.Tasks[find(t, f, "foreign key a a_b_fk")].Deps {
		deps = append(deps, f.Tasks[d].Name)
	}
	slices.Sort(deps)
	if want := []string{"load a 0", "load b 0"}; !slices.Equal(deps, want) {
		t.Errorf("foreign key a a_b_fk depends on %q, want %q", deps, want)
	}
}

// TestFusedTask: a fused task makes the name, journal step and statements
// the task planned apart has (the journal of a run that did not fuse it
// is read by one that does).
func TestFusedTask(t *testing.T) {
	apart, _, _ := planWith(t, 1, taskgraph.AccessExclusive, PostDataOptions{Analyze: true, SmallBytes: 250})
	fused, _, _ := planWith(t, 1, taskgraph.AccessExclusive, PostDataOptions{Analyze: true, SmallBytes: 250, FuseBytes: 250})
	n := 0
	for _, l := range fused.Tasks {
		for i := range l.Then {
			f := &l.Then[i]
			a := apart.Tasks[find(t, apart, f.Name())]
			if f.Step() != a.Step || !slices.Equal(f.SQL(), a.SQL) || f.Kind != a.Kind {
				t.Errorf("fused %s: step %q, SQL %q; planned apart: step %q, SQL %q", f.Name(), f.Step(), f.SQL(), a.Step, a.SQL)
			}
			n++
		}
	}
	if n != 12 {
		t.Errorf("%d fused tasks, want 12 (a's 7, b's 5)", n)
	}
}

// TestUnique: the two tasks of a PRIMARY KEY or UNIQUE constraint make the
// index build and the attachment of pg_dump's statement when they run;
// other roles' statements, and a statement that does not parse, are run as
// they are.
func TestUnique(t *testing.T) {
	const pkey = "ALTER TABLE ONLY public.a\n    ADD CONSTRAINT a_pkey PRIMARY KEY (id);"
	const cluster = "ALTER TABLE public.a CLUSTER ON a_pkey;"
	for _, tc := range []struct {
		name string
		r    role
		sql  []string
		want []string
	}{
		{"index", roleUniqueIndex, []string{pkey, cluster}, []string{"CREATE UNIQUE INDEX a_pkey ON public.a USING btree (id);"}},
		{"attach", roleUniqueAttach, []string{pkey, cluster}, []string{"ALTER TABLE ONLY public.a ADD CONSTRAINT a_pkey PRIMARY KEY USING INDEX a_pkey;", cluster}},
		{"other role", roleConstraint, []string{pkey}, []string{pkey}},
		{"not parsed", roleUniqueIndex, []string{"ALTER TABLE ONLY public.a ADD CONSTRAINT c CHECK (x > 0);"}, []string{"ALTER TABLE ONLY public.a ADD CONSTRAINT c CHECK (x > 0);"}},
	} {
		if got := unique(tc.r, tc.sql); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
