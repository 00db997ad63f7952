package schedule

import (
	"slices"
	"testing"

	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// TestPlanEntriesInOneReading: entries are planned as they come. One that
// depends on an entry of the script not yet read (pg_dump never writes
// one, but its order is not checked) is left to pg_restore, as is what
// depends on it; the entry it named is still planned when it comes, and
// pg_restore's task runs after it.
func TestPlanEntriesInOneReading(t *testing.T) {
	script := scriptOf(t, []testEntry{
		{110, "INDEX", "a_v_idx", []int{1, 111}, "CREATE INDEX a_v_idx ON public.a USING btree (v);"},
		{111, "INDEX", "a_w_idx", []int{1}, "CREATE INDEX a_w_idx ON public.a USING btree (w);"},
		{112, "INDEX", "a_x_idx", []int{1, 110}, "CREATE INDEX a_x_idx ON public.a USING btree (x);"},
		{113, "INDEX", "a_y_idx", []int{1, 111}, "CREATE INDEX a_y_idx ON public.a USING btree (y);"},
	})
	g := &Graph{}
	key := taskgraph.TableKey("public", "a")
	load := g.Add(&Task{Name: "load a", Kind: taskgraph.Data, Cost: 10 << 20, Table: key, Locks: []taskgraph.Lock{{Key: key, Mode: taskgraph.AccessExclusive}}})
	rest, err := addPostData(g, script, PostDataOptions{Tables: map[string]TableFacts{key: {Loads: []int{load}, Size: 10 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.Tasks[rest].Entries, []int{110, 112}; !slices.Equal(got, want) {
		t.Errorf("left to pg_restore: %v, want %v", got, want)
	}
	for _, name := range []string{"index a_w_idx", "index a_y_idx"} {
		if i := find(t, g, name); !reaches(g, rest, i) {
			t.Errorf("pg_restore's task does not wait for %s", name)
		}
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestAbandonPostData: a plan abandoned half way (its script could not
// be read to the end) leaves the graph as it found it: no task of its own,
// nothing fused into the loads.
func TestAbandonPostData(t *testing.T) {
	script, ids := parsedFKSchema(t)
	g := &Graph{}
	tables := oneLoadEach(g, 100, taskgraph.AccessExclusive)
	pp := NewPostData(g, ids, PostDataOptions{Tables: tables, Analyze: true, FuseBytes: 1 << 20})
	for i := range script.Entries[:8] {
		pp.Add(&script.Entries[i])
	}
	if !slices.ContainsFunc(g.Tasks, func(t *Task) bool { return len(t.Then) > 0 }) {
		t.Fatal("nothing was fused: the test does not test Abandon")
	}
	pp.Abandon()
	if len(g.Tasks) != 3 {
		t.Errorf("%d tasks after Abandon, want the 3 loads", len(g.Tasks))
	}
	for _, tk := range g.Tasks {
		if tk.Then != nil {
			t.Errorf("%s keeps %d fused tasks", tk.Name, len(tk.Then))
		}
	}
}

// TestPlanIndexAttach: an INDEX ATTACH locks the tables of the two indexes
// it joins, which it learns from the entries it depends on, and takes
// DDLMutex; it waits for both indexes.
func TestPlanIndexAttach(t *testing.T) {
	script := scriptOf(t, []testEntry{
		{200, "INDEX", "p_v_idx", []int{1}, "CREATE INDEX p_v_idx ON ONLY public.p USING btree (v);"},
		{201, "INDEX", "p1_v_idx", []int{2}, "CREATE INDEX p1_v_idx ON public.p1 USING btree (v);"},
		{202, "INDEX ATTACH", "p1_v_idx", []int{200, 201}, "ALTER INDEX public.p_v_idx ATTACH PARTITION public.p1_v_idx;"},
	})
	g := &Graph{}
	p1 := taskgraph.TableKey("public", "p1")
	load := g.Add(&Task{Name: "load p1", Kind: taskgraph.Data, Cost: 10 << 20, Table: p1, Locks: []taskgraph.Lock{{Key: p1, Mode: taskgraph.RowExclusive}}})
	if _, err := addPostData(g, script, PostDataOptions{Tables: map[string]TableFacts{p1: {Loads: []int{load}, Size: 10 << 20}}}); err != nil {
		t.Fatal(err)
	}
	at := g.Tasks[find(t, g, "attach p1_v_idx")]
	want := []taskgraph.Lock{{Key: taskgraph.TableKey("public", "p"), Mode: taskgraph.AccessExclusive}, {Key: p1, Mode: taskgraph.AccessExclusive}, {Key: taskgraph.DDLMutex, Mode: taskgraph.AccessExclusive}}
	if !slices.Equal(at.Locks, want) {
		t.Errorf("attach locks %v, want %v", at.Locks, want)
	}
	for _, name := range []string{"index p_v_idx", "index p1_v_idx"} {
		if !slices.Contains(at.Deps, find(t, g, name)) {
			t.Errorf("attach does not wait for %s", name)
		}
	}
}

// testEntry is one entry of a test's post-data script.
type testEntry struct {
	id        int
	typ, name string
	deps      []int
	sql       string
}

// scriptOf is the parsed pg_restore script of entries, in their order.
func scriptOf(t *testing.T, entries []testEntry) *toc.Script {
	t.Helper()
	var text string
	var ids []int
	for _, e := range entries {
		text += entry(e.id, e.typ, e.name, e.deps, e.sql)
		ids = append(ids, e.id)
	}
	script, err := toc.ParseScript(text, ids)
	if err != nil {
		t.Fatal(err)
	}
	return script
}

// parsedFKSchema is fkSchema parsed, with its dump IDs.
func parsedFKSchema(t *testing.T) (*toc.Script, []int) {
	t.Helper()
	text, ids := fkSchema()
	script, err := toc.ParseScript(text, ids)
	if err != nil {
		t.Fatal(err)
	}
	return script, ids
}

// oneLoadEach adds one load task of size bytes taking lock mode for each of
// fkSchema's tables a, b and c to g and returns their facts.
func oneLoadEach(g *Graph, size int64, mode taskgraph.LockMode) map[string]TableFacts {
	tables := map[string]TableFacts{}
	for _, name := range []string{"a", "b", "c"} {
		key := taskgraph.TableKey("public", name)
		l := g.Add(&Task{Name: "load " + name, Kind: taskgraph.Data, Cost: size, Table: key, Locks: []taskgraph.Lock{{Key: key, Mode: mode}}})
		tables[key] = TableFacts{Loads: []int{l}, Size: size}
	}
	return tables
}
