package taskgraph

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// graph and task are the runner's types with nothing fused into a task:
// the runner never reads Then.
type (
	graph = Graph[struct{}]
	task  = Task[struct{}]
)

func TestConflicts(t *testing.T) {
	for _, tc := range []struct {
		a, b LockMode
		want bool
	}{
		{Share, Share, false},                              // two CREATE INDEX on one table
		{Share, RowExclusive, true},                        // CREATE INDEX vs COPY
		{ShareUpdateExclusive, ShareUpdateExclusive, true}, // two VALIDATE on one table
		{ShareUpdateExclusive, RowShare, false},            // VALIDATE vs the referenced side of another
		{RowShare, Share, false},                           // referenced side vs CREATE INDEX
		{ShareRowExclusive, ShareRowExclusive, true},       // two ADD FOREIGN KEY
		{AccessShare, AccessExclusive, true},               //
		{AccessShare, Exclusive, false},                    //
		{RowExclusive, RowExclusive, false},                // two COPY into one table
		{AccessExclusive, AccessExclusive, true},           //
		{ShareUpdateExclusive, Share, true},                // ANALYZE vs CREATE INDEX
		{Exclusive, RowShare, true},                        //
		{ShareRowExclusive, RowExclusive, true},            //
		{ShareUpdateExclusive, RowExclusive, false},        // ANALYZE vs COPY
		{ShareRowExclusive, ShareUpdateExclusive, true},    //
		{RowShare, RowExclusive, false},                    //
		{AccessExclusive, AccessShare, true},               //
		{Share, ShareRowExclusive, true},                   //
		{Share, ShareUpdateExclusive, true},                //
		{RowExclusive, ShareUpdateExclusive, false},        //
		{ShareRowExclusive, Share, true},                   //
		{Exclusive, AccessShare, false},                    //
		{RowShare, AccessExclusive, true},                  //
		{RowShare, ShareRowExclusive, false},               //
		{ShareUpdateExclusive, ShareRowExclusive, true},    //
		{RowExclusive, Exclusive, true},                    //
		{AccessShare, ShareRowExclusive, false},            //
		{ShareUpdateExclusive, AccessShare, false},         //
		{Share, Exclusive, true},                           //
		{RowShare, RowShare, false},                        //
		{AccessShare, AccessShare, false},                  //
		{Exclusive, Exclusive, true},                       //
	} {
		if got := Conflicts(tc.a, tc.b); got != tc.want {
			t.Errorf("Conflicts(%d, %d) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestRunLargestFirstAndCancel(t *testing.T) {
	g := &graph{}
	for _, c := range []int64{1, 5, 3} {
		g.Add(&task{Name: fmt.Sprint(c), Cost: c})
	}
	var order []string
	if _, err := g.Run(context.Background(), 1, func(_ context.Context, _ int, tk *task) error {
		order = append(order, tk.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "5,3,1" {
		t.Errorf("order %s, want 5,3,1", got)
	}

	// A failing task stops the others: nothing new starts.
	g = &graph{}
	first := g.Add(&task{Name: "fails", Cost: 10})
	g.Add(&task{Name: "after", Deps: []int{first}})
	ran := 0
	_, err := g.Run(context.Background(), 2, func(_ context.Context, _ int, tk *task) error {
		ran++
		if tk.Name == "fails" {
			return fmt.Errorf("boom")
		}
		return nil
	})
	if err == nil || ran != 1 {
		t.Errorf("err %v after %d tasks, want boom after 1", err, ran)
	}

	g = &graph{}
	a := g.Add(&task{Name: "a"})
	g.Tasks[a].Deps = []int{g.Add(&task{Name: "b", Deps: []int{a}})}
	if err := g.Validate(); err == nil {
		t.Error("a dependency cycle was accepted")
	}
}

// manyTablesGraph is a restore of n one-row tables' shape: per table a load,
// an index and, for every third, a foreign key to the table before it
// (DDLMutex and both tables' locks), all of equal cost; the foreign keys
// come last, as in pg_dump's order.
func manyTablesGraph(n int) *graph {
	g := &graph{}
	key := func(i int) string { return TableKey("public", fmt.Sprintf("t%d", i)) }
	loads := make([]int, n)
	for i := range n {
		loads[i] = g.Add(&task{Name: fmt.Sprintf("load %d", i), Cost: 8192, Locks: []Lock{{key(i), AccessExclusive}}})
	}
	for i := range n {
		g.Add(&task{Name: fmt.Sprintf("index %d", i), Cost: 8192, Deps: []int{loads[i]}, Locks: []Lock{{key(i), Share}}})
	}
	for i := range n {
		if i%3 == 2 {
			g.Add(&task{Name: fmt.Sprintf("fk %d", i), Cost: 8192, Deps: []int{loads[i], loads[i-1]},
				Locks: []Lock{{key(i), ShareRowExclusive}, {key(i - 1), ShareRowExclusive}, {DDLMutex, AccessExclusive}}})
		}
	}
	return g
}

// TestSchedulerLinear: with thousands of ready tasks, many of them waiting
// for one lock (foreign keys for DDLMutex), the scheduler looks at each task
// a bounded number of times, and never sorts the ready list again: a
// restore of 100,000 small tables was quadratic in its tasks. The state is
// driven directly, two tasks running at a time, so the count is exact.
func TestSchedulerLinear(t *testing.T) {
	g := manyTablesGraph(6000)
	s := newState(g)
	var running []int
	for {
		for len(running) < 2 {
			s.mu.Lock()
			i, ok := s.take()
			if ok {
				for _, l := range g.Tasks[i].Locks {
					s.held[l.Key] = append(s.held[l.Key], l.Mode)
				}
			}
			s.mu.Unlock()
			if !ok {
				break
			}
			running = append(running, i)
		}
		if len(running) == 0 {
			break
		}
		// The oldest finishes first.
		s.finish(running[0], Timing{}, nil)
		running = running[1:]
	}
	if s.left != 0 {
		t.Fatalf("%d of %d tasks never ran (a waiter was never woken)", s.left, len(g.Tasks))
	}
	t.Logf("%d looks for %d tasks", s.looks, len(g.Tasks))
	if max := 4 * len(g.Tasks); s.looks > max {
		t.Errorf("the scheduler looked at ready tasks %d times for %d tasks, want at most %d", s.looks, len(g.Tasks), max)
	}
}

// TestRunParkedWaiters runs the many-tables graph on real workers: every
// task runs once, after its dependencies, never beside a conflicting lock
// (the parked waiters of DDLMutex and of each table are all woken).
func TestRunParkedWaiters(t *testing.T) {
	for _, workers := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			g := manyTablesGraph(300)
			var mu sync.Mutex
			running := map[*task]bool{}
			done := map[*task]bool{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := g.Run(ctx, workers, func(ctx context.Context, w int, tk *task) error {
				mu.Lock()
				for _, d := range tk.Deps {
					if !done[g.Tasks[d]] {
						t.Errorf("%q started before %q finished", tk.Name, g.Tasks[d].Name)
					}
				}
				for o := range running {
					for _, a := range tk.Locks {
						for _, b := range o.Locks {
							if a.Key == b.Key && Conflicts(a.Mode, b.Mode) {
								t.Errorf("%q runs beside %q with conflicting locks on %q", tk.Name, o.Name, a.Key)
							}
						}
					}
				}
				running[tk] = true
				mu.Unlock()
				time.Sleep(time.Duration(len(tk.Name)%3) * 100 * time.Microsecond)
				mu.Lock()
				delete(running, tk)
				if done[tk] {
					t.Errorf("%q ran twice", tk.Name)
				}
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

// TestMaxPerTable: with eight workers and a limit of three loads per
// table, one table's loads never run more than three at once, while the
// other table's run beside them; every task runs.
func TestMaxPerTable(t *testing.T) {
	g := &graph{MaxPerTable: 3}
	for _, table := range []string{"a", "b"} {
		for i := range 10 {
			g.Add(&task{Name: fmt.Sprintf("load %s %d", table, i), Kind: Data, Cost: int64(100 - i), Table: table,
				Locks: []Lock{{Key: table, Mode: RowExclusive}}})
		}
	}
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	both := false
	ran := 0
	_, err := g.Run(context.Background(), 8, func(ctx context.Context, w int, tk *task) error {
		mu.Lock()
		running[tk.Table]++
		most[tk.Table] = max(most[tk.Table], running[tk.Table])
		both = both || (running["a"] > 0 && running["b"] > 0)
		ran++
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		running[tk.Table]--
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ran != 20 || most["a"] != 3 || most["b"] != 3 || !both {
		t.Errorf("ran %d tasks, at most %v at once per table, both tables at once: %v; want 20, 3 each, true", ran, most, both)
	}
}

// TestRunKeepGoing fails one task of a diamond and a chain: its
// dependents (directly and through others) are skipped and named in its
// Failure, every other task runs, and the run returns no error.
func TestRunKeepGoing(t *testing.T) {
	g := &graph{}
	a := g.Add(&task{Name: "a"})
	b := g.Add(&task{Name: "b", Deps: []int{a}})
	c := g.Add(&task{Name: "c", Deps: []int{a}})
	d := g.Add(&task{Name: "d", Deps: []int{b, c}})
	e := g.Add(&task{Name: "e"})
	f := g.Add(&task{Name: "f", Deps: []int{e}})
	var mu sync.Mutex
	ran := map[string]bool{}
	_, failures, err := g.RunKeepGoing(context.Background(), 2, func(_ context.Context, _ int, tk *task) error {
		mu.Lock()
		ran[tk.Name] = true
		mu.Unlock()
		if tk.Name == "b" {
			return fmt.Errorf("b failed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(failures) != 1 || failures[0].Task != b || fmt.Sprint(failures[0].Skipped) != fmt.Sprint([]int{d}) {
		t.Fatalf("failures %+v, want b failed with d skipped", failures)
	}
	for _, n := range []int{a, b, c, e, f} {
		if !ran[g.Tasks[n].Name] {
			t.Errorf("task %s did not run", g.Tasks[n].Name)
		}
	}
	if ran["d"] {
		t.Errorf("task d ran after b failed")
	}
}
