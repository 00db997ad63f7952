package schedule

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// smallTables is the post-data script of n small tables shaped like
// pgtest.SmallTables (a primary key, a secondary index, every third a
// foreign key to the table before it) and the plan options of a restore
// loading each by one task of 300 bytes, into g.
func smallTables(t testing.TB, n int, g *Graph) (*toc.Script, PlanOptions) {
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
		key := TableKey("public", name(i))
		l := g.Add(&Task{Name: "load " + name(i), Step: fmt.Sprintf("load stream %d", i), Kind: Data, Cost: 300,
			Locks: []Lock{{key, AccessExclusive}}, Table: key})
		tables[key] = TableFacts{Loads: []int{l}, Size: 300}
	}
	return script, PlanOptions{Tables: tables, Analyze: true, SmallBytes: 1 << 20}
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
		for _, f := range t.Then {
			then = append(then, fmt.Sprintf("%s|%s|%q", f.Name, f.Step, f.SQL))
		}
		locks := append([]Lock{}, t.Locks...)
		slices.SortFunc(locks, func(a, b Lock) int { return strings.Compare(a.Key, b.Key) })
		out = append(out, fmt.Sprintf("%s kind=%d step=%q sql=%q deps=%q locks=%v then=%q", t.Name, t.Kind, t.Step, t.SQL, deps, locks, then))
	}
	slices.Sort(out)
	return out
}

// TestFuseWhilePlanning: planning with FuseBytes gives the graph that
// planning and then FuseSmallTables gives, for small tables with foreign
// keys and for fkSchema's mixed shapes with a large table among them.
func TestFuseWhilePlanning(t *testing.T) {
	t.Run("small tables", func(t *testing.T) {
		after, inline := &Graph{}, &Graph{}
		script, opts := smallTables(t, 30, after)
		if _, err := PlanPostData(after, script, opts); err != nil {
			t.Fatal(err)
		}
		FuseSmallTables(after, 1<<20)
		script, opts = smallTables(t, 30, inline)
		opts.FuseBytes = 1 << 20
		if _, err := PlanPostData(inline, script, opts); err != nil {
			t.Fatal(err)
		}
		if err := inline.Validate(); err != nil {
			t.Fatal(err)
		}
		if a, b := describe(after), describe(inline); !slices.Equal(a, b) {
			t.Errorf("fused while planning:\n%s\nplanned, then fused:\n%s", strings.Join(b, "\n"), strings.Join(a, "\n"))
		}
		if len(inline.Tasks) != 30+10+1 {
			t.Errorf("%d tasks, want 41 (30 loads, 10 foreign keys, the rest)", len(inline.Tasks))
		}
	})
	t.Run("mixed", func(t *testing.T) {
		after, _, _ := planWith(t, 1, AccessExclusive, PlanOptions{Analyze: true, SmallBytes: 250})
		FuseSmallTables(after, 250)
		inline, _, _ := planWith(t, 1, AccessExclusive, PlanOptions{Analyze: true, SmallBytes: 250, FuseBytes: 250})
		if a, b := describe(after), describe(inline); !slices.Equal(a, b) {
			t.Errorf("fused while planning:\n%s\nplanned, then fused:\n%s", strings.Join(b, "\n"), strings.Join(a, "\n"))
		}
	})
}

// TestSmallTablesPlanMemory bounds the memory a planned graph of many
// small tables holds per table when PlanPostData returns, the restore's
// peak (the parsed script is live beside it until then). Planned apart,
// each small table's index, constraint and ANALYZE were tasks of their own,
// with their dependency and lock lists, until FuseSmallTables merged
// them: with 100,000 tables that was 400 MB live, twice the fused graph
// (about 1,800 bytes a table here, against 1,000 fused as planned).
func TestSmallTablesPlanMemory(t *testing.T) {
	const n = 3000
	g := &Graph{}
	script, opts := smallTables(t, n, g)
	opts.FuseBytes = 1 << 20
	before := liveHeap()
	if _, err := PlanPostData(g, script, opts); err != nil {
		t.Fatal(err)
	}
	per := (liveHeap() - before) / n
	runtime.KeepAlive(script)
	runtime.KeepAlive(g)
	t.Logf("%d tasks, %d bytes per table", len(g.Tasks), per)
	if per > 1400 {
		t.Errorf("the planned graph holds %d bytes per small table, want at most 1,400", per)
	}
}

// liveHeap is the bytes of live heap objects.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
