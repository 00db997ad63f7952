package schedule

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// entry renders one TOC entry as pg_restore --verbose prints it.
func entry(id int, typ, name string, deps []int, sql string) string {
	d := ""
	if len(deps) > 0 {
		var s []string
		for _, x := range deps {
			s = append(s, fmt.Sprint(x))
		}
		d = "-- Dependencies: " + strings.Join(s, " ") + "\n"
	}
	return fmt.Sprintf("--\n-- TOC entry %d (class 1259 OID %d)\n%s-- Name: %s; Type: %s; Schema: public; Owner: postgres\n--\n\n%s\n\n\n", id, id+10000, d, name, typ, sql)
}

// fkSchema is the post-data of three tables: a and b reference each other,
// c references itself and a; a has a secondary index, a clustered index and
// an exclusion constraint, b a deferrable unique constraint.
func fkSchema() (script string, ids []int) {
	var b strings.Builder
	b.WriteString("SET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\nSET default_tablespace = '';\n\n")
	add := func(id int, typ, name string, deps []int, sql string) {
		b.WriteString(entry(id, typ, name, deps, sql))
		ids = append(ids, id)
	}
	add(100, "CONSTRAINT", "a a_pkey", []int{1}, "ALTER TABLE ONLY public.a\n    ADD CONSTRAINT a_pkey PRIMARY KEY (id);")
	add(101, "CONSTRAINT", "b b_pkey", []int{2}, "ALTER TABLE ONLY public.b\n    ADD CONSTRAINT b_pkey PRIMARY KEY (id) WITH (fillfactor='70');")
	add(102, "CONSTRAINT", "b b_k_key", []int{2}, "ALTER TABLE ONLY public.b\n    ADD CONSTRAINT b_k_key UNIQUE (k) DEFERRABLE INITIALLY DEFERRED;")
	add(103, "CONSTRAINT", "c c_pkey", []int{3}, "ALTER TABLE ONLY public.c\n    ADD CONSTRAINT c_pkey PRIMARY KEY (id);")
	add(104, "CONSTRAINT", "a a_excl", []int{1}, "ALTER TABLE ONLY public.a\n    ADD CONSTRAINT a_excl EXCLUDE USING gist (r WITH &&);")
	add(110, "INDEX", "a_v_idx", []int{1}, "CREATE INDEX a_v_idx ON public.a USING btree (v);")
	add(111, "INDEX", "a_w_idx", []int{1}, "CREATE INDEX a_w_idx ON public.a USING btree (w);\n\nALTER TABLE public.a CLUSTER ON a_w_idx;")
	add(120, "COMMENT", "INDEX a_v_idx", []int{110}, "COMMENT ON INDEX public.a_v_idx IS 'x';")
	add(130, "FK CONSTRAINT", "a a_b_fk", []int{1, 2, 101}, "ALTER TABLE ONLY public.a\n    ADD CONSTRAINT a_b_fk FOREIGN KEY (b_id) REFERENCES public.b(id) DEFERRABLE INITIALLY DEFERRED;")
	add(131, "FK CONSTRAINT", "b b_a_fk", []int{2, 1, 100}, "ALTER TABLE ONLY public.b\n    ADD CONSTRAINT b_a_fk FOREIGN KEY (a_id) REFERENCES public.a(id) MATCH FULL ON DELETE RESTRICT;")
	add(132, "FK CONSTRAINT", "c c_c_fk", []int{3, 103}, "ALTER TABLE ONLY public.c\n    ADD CONSTRAINT c_c_fk FOREIGN KEY (parent) REFERENCES public.c(id);")
	add(133, "FK CONSTRAINT", "c c_a_fk", []int{3, 1, 100}, "ALTER TABLE ONLY public.c\n    ADD CONSTRAINT c_a_fk FOREIGN KEY (a_id) REFERENCES public.a(id) NOT VALID;")
	add(140, "TRIGGER", "a a_trg", []int{1}, "CREATE TRIGGER a_trg AFTER INSERT ON public.a FOR EACH ROW EXECUTE FUNCTION public.f();")
	b.WriteString("--\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict KEY\n")
	return b.String(), ids
}

// plan builds the graph of fkSchema with two load tasks per table.
func plan(t *testing.T) (*Graph, map[string][]int, int) {
	t.Helper()
	return planWith(t, 2, taskgraph.RowExclusive, PostDataOptions{Analyze: true})
}

// planWith builds the graph of fkSchema with loadsPer load tasks per table
// taking lock mode, tables a, b and c of 100, 200 and 300 bytes, and opts
// (their Tables set here).
func planWith(t *testing.T, loadsPer int, mode taskgraph.LockMode, opts PostDataOptions) (*Graph, map[string][]int, int) {
	t.Helper()
	text, ids := fkSchema()
	script, err := toc.ParseScript(text, ids)
	if err != nil {
		t.Fatal(err)
	}
	g := &Graph{}
	tables := map[string]TableFacts{}
	loads := map[string][]int{}
	for i, name := range []string{"a", "b", "c"} {
		key := taskgraph.TableKey("public", name)
		for p := range loadsPer {
			loads[name] = append(loads[name], g.Add(&Task{Name: fmt.Sprintf("load %s %d", name, p), Kind: taskgraph.Data,
				Cost: int64(100 * (i + 1)), Locks: []taskgraph.Lock{{Key: key, Mode: mode}}, Table: key}))
		}
		tables[key] = TableFacts{Loads: loads[name], Size: int64(100 * (i + 1))}
	}
	opts.Tables = tables
	rest, err := addPostData(g, script, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g, loads, rest
}

// reaches reports whether task a depends on task b, directly or not.
func reaches(g *Graph, a, b int) bool {
	seen := map[int]bool{}
	var walk func(int) bool
	walk = func(i int) bool {
		for _, d := range g.Tasks[i].Deps {
			if d == b || (!seen[d] && walk(d)) {
				return true
			}
			seen[d] = true
		}
		return false
	}
	return walk(a)
}

func find(t *testing.T, g *Graph, name string) int {
	t.Helper()
	for i, tk := range g.Tasks {
		if tk.Name == name {
			return i
		}
	}
	t.Fatalf("no task %q", name)
	return -1
}

func TestPlanOrder(t *testing.T) {
	g, loads, rest := plan(t)
	must := func(a, b string) {
		t.Helper()
		if !reaches(g, find(t, g, a), find(t, g, b)) {
			t.Errorf("%q does not wait for %q", a, b)
		}
	}
	// No index of a table before all its data.
	for i, tk := range g.Tasks {
		if tk.Kind != taskgraph.Index && tk.Kind != taskgraph.Constraint && tk.Kind != taskgraph.Analyze {
			continue
		}
		for _, l := range tk.Locks {
			table := strings.TrimPrefix(l.Key, "public\x00")
			for _, ld := range loads[table] {
				if !reaches(g, i, ld) {
					t.Errorf("%q does not wait for %q", tk.Name, g.Tasks[ld].Name)
				}
			}
		}
	}
	// Foreign keys after both ends' unique indexes and constraints.
	must("foreign key a a_b_fk", "unique index b b_pkey")
	must("foreign key a a_b_fk", "constraint b b_pkey")
	must("foreign key a a_b_fk", "constraint a a_pkey")
	must("foreign key b b_a_fk", "constraint a a_pkey")
	must("foreign key b b_a_fk", "unique index b b_k_key")
	must("validate a a_b_fk", "foreign key a a_b_fk")
	must("validate c c_c_fk", "foreign key c c_c_fk")
	must("index markers a_w_idx", "index a_w_idx")
	must("analyze public.a", "index markers a_w_idx")
	must("analyze public.a", "constraint a a_excl")
	// ANALYZE reads nothing a foreign key adds: it does not wait for one.
	for _, fk := range []string{"foreign key a a_b_fk", "validate a a_b_fk", "foreign key b b_a_fk", "validate b b_a_fk", "foreign key c c_a_fk"} {
		for _, an := range []string{"analyze public.a", "analyze public.b", "analyze public.c"} {
			if reaches(g, find(t, g, an), find(t, g, fk)) {
				t.Errorf("%q waits for %q", an, fk)
			}
		}
	}
	for i := range g.Tasks {
		if g.Tasks[i].Kind != taskgraph.Rest && g.Tasks[i].Kind != taskgraph.Analyze && i != rest && !reaches(g, rest, i) {
			t.Errorf("rest of post-data does not wait for %q", g.Tasks[i].Name)
		}
	}

	// The shapes pg_dump writes become the fast forms, with flags kept.
	sql := func(name string) string { return strings.Join(g.Tasks[find(t, g, name)].SQL, "\n") }
	for name, want := range map[string]string{
		"unique index b b_pkey": "CREATE UNIQUE INDEX b_pkey ON public.b USING btree (id) WITH (fillfactor = '70');",
		"constraint b b_pkey":   "ALTER TABLE ONLY public.b ADD CONSTRAINT b_pkey PRIMARY KEY USING INDEX b_pkey;",
		"constraint b b_k_key":  "ALTER TABLE ONLY public.b ADD CONSTRAINT b_k_key UNIQUE USING INDEX b_k_key DEFERRABLE INITIALLY DEFERRED;",
		"foreign key a a_b_fk":  "REFERENCES public.b(id) DEFERRABLE INITIALLY DEFERRED NOT VALID;",
		"validate a a_b_fk":     "ALTER TABLE ONLY public.a VALIDATE CONSTRAINT a_b_fk;",
		"foreign key c c_a_fk":  "REFERENCES public.a(id) NOT VALID;",
		"constraint a a_excl":   "ADD CONSTRAINT a_excl EXCLUDE USING gist (r WITH &&);",
		"index markers a_w_idx": "ALTER TABLE public.a CLUSTER ON a_w_idx;",
		"unique index c c_pkey": "SET default_tablespace = '';",
	} {
		if got := sql(name); !strings.Contains(got, want) {
			t.Errorf("%s: SQL %q does not contain %q", name, got, want)
		}
	}
	if strings.Contains(sql("foreign key c c_a_fk"), "NOT VALID NOT VALID") {
		t.Error("a key NOT VALID in the source got NOT VALID twice")
	}
	for _, name := range []string{"validate c c_a_fk"} {
		for _, tk := range g.Tasks {
			if tk.Name == name {
				t.Errorf("%s: a key NOT VALID in the source must stay so", name)
			}
		}
	}
	if got := fmt.Sprint(g.Tasks[rest].Entries); got != "[120 140]" {
		t.Errorf("pg_restore gets entries %s, want [120 140]", got)
	}
}

// TestRunNoConflicts runs the plan with workers that hold each task for a
// moment and checks, while they run, that no two running tasks hold
// conflicting locks (so none could block or deadlock in the server, even
// with circular foreign keys) and that every task starts after its
// dependencies end.
func TestRunNoConflicts(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			g, _, _ := plan(t)
			var mu sync.Mutex
			running := map[*Task]bool{}
			done := map[*Task]bool{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := g.Run(ctx, workers, func(ctx context.Context, w int, tk *Task) error {
				mu.Lock()
				for _, d := range tk.Deps {
					if !done[g.Tasks[d]] {
						t.Errorf("%q started before %q finished", tk.Name, g.Tasks[d].Name)
					}
				}
				for o := range running {
					for _, a := range tk.Locks {
						for _, b := range o.Locks {
							if a.Key == b.Key && taskgraph.Conflicts(a.Mode, b.Mode) {
								t.Errorf("%q runs beside %q with conflicting locks on %q", tk.Name, o.Name, a.Key)
							}
						}
					}
				}
				running[tk] = true
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				delete(running, tk)
				done[tk] = true
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(done) != len(g.Tasks) {
				t.Fatalf("ran %d of %d tasks", len(done), len(g.Tasks))
			}
		})
	}
}

// TestPlanSkipsAnalyzeWithStatistics: a table whose statistics the
// restore brings back gets no ANALYZE task; the others keep theirs.
func TestPlanSkipsAnalyzeWithStatistics(t *testing.T) {
	script, _ := parsedFKSchema(t)
	g := &Graph{}
	tables := oneLoadEach(g, 1, taskgraph.RowExclusive)
	stats := map[string]bool{taskgraph.TableKey("public", "b"): true}
	if _, err := addPostData(g, script, PostDataOptions{Tables: tables, Analyze: true, Statistics: stats}); err != nil {
		t.Fatal(err)
	}
	var analyzed []string
	for _, tk := range g.Tasks {
		if tk.Kind == taskgraph.Analyze {
			analyzed = append(analyzed, tk.Name)
		}
	}
	sort.Strings(analyzed)
	if want := []string{"analyze public.a", "analyze public.c"}; !reflect.DeepEqual(analyzed, want) {
		t.Errorf("analyze tasks %v, want %v", analyzed, want)
	}
}
