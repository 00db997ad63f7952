package schedule

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/heaptest"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// smallTables is the post-data script of n small tables shaped like
// pgtest.SmallTables (a primary key, a secondary index, every third a
// foreign key to the table before it) and the plan options of a restore
// loading each by one task of 300 bytes, into g.
func smallTables(t testing.TB, n int, g *Graph) (*toc.Script, PostDataOptions) {
	var b strings.Builder
	var ids []int
	b.WriteString("SET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\nSET default_tablespace = '';\n\n")
	name := func(i int) string { return fmt.Sprintf("small_%06d", i) }
	id := 100000
	add := func(typ, tag string, deps []int, sql string) int {
		id++
		b.WriteString(entry(id, typ, tag, deps, sql))
		ids = append(ids, id)
		return id
	}
	pkeys := make([]int, n+1)
	for i := 1; i <= n; i++ {
		pkeys[i] = add("CONSTRAINT", name(i)+" "+name(i)+"_pkey", []int{i},
			fmt.Sprintf("ALTER TABLE ONLY public.%s\n    ADD CONSTRAINT %s_pkey PRIMARY KEY (id);", name(i), name(i)))
	}
	for i := 1; i <= n; i++ {
		add("INDEX", name(i)+"_label_idx", []int{i}, fmt.Sprintf("CREATE INDEX %s_label_idx ON public.%s USING btree (label);", name(i), name(i)))
	}
	for i := 3; i <= n; i += 3 {
		add("FK CONSTRAINT", name(i)+" "+name(i)+"_ref_fkey", []int{i, i - 1, pkeys[i-1]},
			fmt.Sprintf("ALTER TABLE ONLY public.%s\n    ADD CONSTRAINT %s_ref_fkey FOREIGN KEY (ref) REFERENCES public.%s(id);", name(i), name(i), name(i-1)))
	}
	b.WriteString("--\n-- PostgreSQL database dump complete\n--\n\n")
	script, err := toc.ParseScript(b.String(), ids)
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]TableFacts{}
	for i := 1; i <= n; i++ {
		key := taskgraph.TableKey("public", name(i))
		l := g.Add(&Task{Name: "load " + name(i), Step: fmt.Sprintf("load stream %d", i), Kind: taskgraph.Data, Cost: 300,
			Locks: []taskgraph.Lock{{Key: key, Mode: taskgraph.AccessExclusive}}, Table: key})
		tables[key] = TableFacts{Loads: []int{l}, Size: 300}
	}
	return script, PostDataOptions{Tables: tables, Analyze: true, SmallBytes: 1 << 20}
}

// describe renders a graph's tasks with their dependencies, locks and
// fused tasks, by name, for comparing two graphs.
func describe(g *Graph) []string {
	var out []string
	for _, t := range g.Tasks {
		var deps, then []string
		for _, d := range t.Deps {
			deps = append(deps, g.Tasks[d].Name)
		}
		slices.Sort(deps)
		deps = slices.Compact(deps)
		for i := range t.Then {
			f := &t.Then[i]
			then = append(then, fmt.Sprintf("%s|%s|%q", f.Name(), f.Step(), f.SQL()))
		}
		locks := append([]taskgraph.Lock{}, t.Locks...)
		slices.SortFunc(locks, func(a, b taskgraph.Lock) int { return strings.Compare(a.Key, b.Key) })
		out = append(out, fmt.Sprintf("%s kind=%d step=%q sql=%q deps=%q locks=%v then=%q", t.Name, t.Kind, t.Step, t.SQL, deps, locks, then))
	}
	slices.Sort(out)
	return out
}

// TestFuseWhilePlanning: planned with FuseBytes, each small table's
// primary key (a unique index, then the constraint), secondary index and
// ANALYZE join its load in that order; what is left is the loads, the
// foreign keys, which wait for the loads of their two tables alone, and
// pg_restore's task.
func TestFuseWhilePlanning(t *testing.T) {
	g := &Graph{}
	script, opts := smallTables(t, 30, g)
	opts.FuseBytes = 1 << 20
	if _, err := addPostData(g, script, opts); err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(g.Tasks) != 30+10+1 {
		t.Errorf("%d tasks, want 41 (30 loads, 10 foreign keys, the rest)", len(g.Tasks))
	}
	for i := 1; i <= 30; i++ {
		name := fmt.Sprintf("small_%06d", i)
		want := []string{"unique index " + name + " " + name + "_pkey", "constraint " + name + " " + name + "_pkey",
			"index " + name + "_label_idx", "analyze public." + name}
		then := g.Tasks[find(t, g, "load "+name)].Then
		var got []string
		for k := range then {
			got = append(got, then[k].Name())
		}
		if !slices.Equal(got, want) {
			t.Errorf("fused into load %s: %q, want %q", name, got, want)
		}
		if i%3 != 0 {
			continue
		}
		var deps []string
		for _, d := range g.Tasks[find(t, g, "foreign key "+name+" "+name+"_ref_fkey")].Deps {
			deps = append(deps, g.Tasks[d].Name)
		}
		slices.Sort(deps)
		if want := []string{fmt.Sprintf("load small_%06d", i-1), "load " + name}; !slices.Equal(deps, want) {
			t.Errorf("foreign key of %s depends on %q, want %q", name, deps, want)
		}
	}
}

// TestSmallTablesPlanMemory bounds the memory a planned graph of many
// small tables holds per table, which with 100,000 tables is most of a
// restore's memory. Planned apart, each small table's index, constraint
// and ANALYZE were tasks of their own (1,800 bytes a table here); fused as
// planned, 1,000 while each fused task kept its name, journal step and
// statements made; 316 since it keeps only what they are made of (Fused),
// pg_dump's statement of a primary key standing for its two tasks' (the
// script, which holds the statements' texts, is not counted).
func TestSmallTablesPlanMemory(t *testing.T) {
	const n = 3000
	g := &Graph{}
	script, opts := smallTables(t, n, g)
	opts.FuseBytes = 1 << 20
	before := heaptest.Live()
	if _, err := addPostData(g, script, opts); err != nil {
		t.Fatal(err)
	}
	per := (heaptest.Live() - before) / n
	runtime.KeepAlive(script)
	runtime.KeepAlive(g)
	t.Logf("%d tasks, %d bytes per table", len(g.Tasks), per)
	if per > 450 {
		t.Errorf("the planned graph holds %d bytes per small table, want at most 450", per)
	}
}
