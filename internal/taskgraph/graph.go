// Package taskgraph runs a restore's work as a dependency graph on N
// workers: table loads, index builds, constraints, foreign keys, the rest of
// post-data and ANALYZE (internal/schedule makes the post-data tasks of
// pg_dump's statements). A task starts when its dependencies are done and no
// running task holds a conflicting table lock, so that workers never sit
// blocked inside the server (and can never deadlock there); among the tasks
// that could start, the largest goes first, because the longest work
// started last is what makes a restore slow.
package taskgraph

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Group is the kind of work a task does, one line of the phase report each.
type Group uint8

// Task groups, in the order the phase report lists them.
const (
	Data Group = iota
	Index
	Constraint
	ForeignKey
	Rest
	Analyze
	numKinds
)

// String names a group in the phase report.
func (k Group) String() string {
	return [...]string{"data", "indexes", "constraints", "foreign keys", "rest of post-data", "analyze"}[k]
}

// LockMode is a PostgreSQL table lock mode, weakest first.
type LockMode int

// The table lock modes the restore's statements take.
const (
	AccessShare LockMode = iota + 1
	RowShare
	RowExclusive
	ShareUpdateExclusive
	Share
	ShareRowExclusive
	Exclusive
	AccessExclusive
)

// Conflicts reports whether two lock modes on one table conflict, per
// PostgreSQL's table lock conflict matrix.
func Conflicts(a, b LockMode) bool {
	if a > b {
		a, b = b, a
	}
	switch a {
	case AccessShare:
		return b == AccessExclusive
	case RowShare:
		return b >= Exclusive
	case RowExclusive:
		return b >= Share
	case ShareUpdateExclusive:
		return b >= ShareUpdateExclusive
	case Share:
		return b != Share
	}
	return true // ShareRowExclusive and stronger conflict with themselves and all above
}

// Lock is a lock a task takes on a table (or on a named resource such as
// DDLMutex), held until the task ends.
type Lock struct {
	Key  string // the table's schema and name, unquoted, joined by a NUL byte
	Mode LockMode
}

// DDLMutex is a lock key that serialises short catalog changes touching
// tables their task cannot name (attaching partition indexes, constraints
// on partitioned parents), whose lock order inside the server is not ours
// to choose.
const DDLMutex = "\x00ddl"

// TableKey is the lock key of a table.
func TableKey(schema, name string) string { return schema + "\x00" + name }

// Task is one unit of work; F is what the caller merges into it (Then).
type Task[F any] struct {
	Name  string // for reports, e.g. "index app.orders_pkey"
	Kind  Group
	Cost  int64 // estimated work (bytes); larger starts first
	Deps  []int // indexes of tasks that must finish first
	Locks []Lock
	// Step names the task's work in a restore journal: derived from the
	// archive (a stream number, a dump ID), never from run order, so that a
	// resumed run can tell which tasks an earlier one finished. Empty: the
	// task is not journaled.
	Step string

	// Payload for the executor; which fields are set depends on the task.
	SQL     []string // statements run one by one on a worker's connection
	Entries []int    // dump IDs pg_restore restores (Kind Rest)
	Table   string   // lock key of the table (Data, Analyze)
	Data    any      // caller's payload (Data tasks)
	// Then are tasks merged into this one (schedule.PostDataOptions.FuseBytes):
	// run after it, in its transaction, on its connection. The runner never
	// reads them; F is the caller's type of them (schedule.Fused).
	Then []F
}

// Graph is a set of tasks and their dependencies.
type Graph[F any] struct {
	Tasks []*Task[F]
	// MaxPerTable is how many Data tasks of one table (Task.Table) may
	// run at once; 0: no limit. Connections loading one table contend for
	// its last page and its extension; past some number they add CPU and
	// no speed, while other tables' loads scale on.
	MaxPerTable int
}

// Add appends a task and returns its index.
func (g *Graph[F]) Add(t *Task[F]) int {
	g.Tasks = append(g.Tasks, t)
	return len(g.Tasks) - 1
}

// Timing is when one task ran.
type Timing struct {
	Task   int
	Worker int
	Start  time.Duration // since Run began
	End    time.Duration
}

// Exec runs one task on worker w (0..workers-1).
type Exec[F any] func(ctx context.Context, w int, t *Task[F]) error

// Validate checks that dependencies name existing tasks and form no cycle.
func (g *Graph[F]) Validate() error {
	state := make([]int8, len(g.Tasks)) // 0 new, 1 visiting, 2 done
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("taskgraph: dependency cycle through %q", g.Tasks[i].Name)
		case 2:
			return nil
		}
		state[i] = 1
		for _, d := range g.Tasks[i].Deps {
			if d < 0 || d >= len(g.Tasks) {
				return fmt.Errorf("taskgraph: task %q depends on unknown task %d", g.Tasks[i].Name, d)
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		state[i] = 2
		return nil
	}
	for i := range g.Tasks {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

// Run executes every task on workers goroutines. The first error cancels
// the rest: running tasks see their context cancelled and no new task
// starts. It returns when every started task has returned.
func (g *Graph[F]) Run(ctx context.Context, workers int, exec Exec[F]) ([]Timing, error) {
	timings, _, err := g.run(ctx, workers, exec, false)
	return timings, err
}

// Failure is a task that failed in RunKeepGoing, and the tasks left out
// because they depend on it (directly or through others).
type Failure struct {
	Task    int
	Err     error
	Skipped []int
}

// RunKeepGoing is Run that goes on past a failed task, as pg_restore goes
// on past a failed statement: the task's dependents (transitively) never
// start and are named in its Failure, and every other task runs. Only a
// cancelled ctx stops it early (its error is then returned).
func (g *Graph[F]) RunKeepGoing(ctx context.Context, workers int, exec Exec[F]) ([]Timing, []Failure, error) {
	return g.run(ctx, workers, exec, true)
}

// run is Run and RunKeepGoing: one worker pool, where keepGoing decides
// whether a task's error stops the pool or only leaves out its
// dependents.
func (g *Graph[F]) run(ctx context.Context, workers int, exec Exec[F], keepGoing bool) ([]Timing, []Failure, error) {
	if err := g.Validate(); err != nil {
		return nil, nil, err
	}
	if workers < 1 {
		workers = 1
	}
	s := newState(g)
	s.keepGoing = keepGoing
	begin := time.Now()
	eg, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		eg.Go(func() error {
			for {
				i, ok := s.next(gctx)
				if !ok {
					return gctx.Err()
				}
				start := time.Since(begin)
				err := exec(gctx, w, g.Tasks[i])
				s.finish(i, Timing{Task: i, Worker: w, Start: start, End: time.Since(begin)}, err)
				if err != nil && (!keepGoing || gctx.Err() != nil) {
					return err
				}
			}
		})
	}
	err := eg.Wait()
	return s.timings, s.failures, err
}

// state is the scheduler's bookkeeping, guarded by mu.
type state[F any] struct {
	g       *Graph[F]
	mu      sync.Mutex
	cond    *sync.Cond
	pending []int // unmet dependency count per task
	users   [][]int
	ready   readyHeap[F]             // tasks whose dependencies are done, not started, not parked
	parked  map[string]*readyHeap[F] // ready tasks waiting for a lock on the key
	held    map[string][]LockMode
	loading map[string]int // running Data tasks per table (Graph.MaxPerTable)
	left    int            // tasks not finished
	looks   int            // tasks taken off the ready heap, started or parked (for tests)
	failed  bool
	timings []Timing
	// keepGoing: a failed task leaves out its dependents instead of
	// stopping the run (RunKeepGoing), recorded in failures; skipped
	// marks the tasks left out.
	keepGoing bool
	failures  []Failure
	skipped   map[int]bool
}

func newState[F any](g *Graph[F]) *state[F] {
	s := &state[F]{g: g, pending: make([]int, len(g.Tasks)), users: make([][]int, len(g.Tasks)),
		held: map[string][]LockMode{}, loading: map[string]int{}, left: len(g.Tasks), ready: readyHeap[F]{tasks: g.Tasks}, parked: map[string]*readyHeap[F]{},
		// One timing per task: grown by doubling, the last growth at
		// 130,000 tasks held 15 MB at once at the run's end.
		timings: make([]Timing, 0, len(g.Tasks))}
	s.cond = sync.NewCond(&s.mu)
	for i, t := range g.Tasks {
		seen := map[int]bool{}
		for _, d := range t.Deps {
			if !seen[d] {
				seen[d] = true
				s.pending[i]++
				s.users[d] = append(s.users[d], i)
			}
		}
		if s.pending[i] == 0 {
			s.ready.ids = append(s.ready.ids, i)
		}
	}
	heap.Init(&s.ready)
	return s
}

// readyHeap holds the ready tasks, largest first, then in graph order: a
// heap rather than a list sorted again after every task, which cost
// O(n log n) per task and made a restore of 100,000 small tables (half a
// million tasks) quadratic.
type readyHeap[F any] struct {
	tasks []*Task[F]
	ids   []int
}

func (h *readyHeap[F]) Len() int { return len(h.ids) }
func (h *readyHeap[F]) Less(a, b int) bool {
	ta, tb := h.tasks[h.ids[a]], h.tasks[h.ids[b]]
	if ta.Cost != tb.Cost {
		return ta.Cost > tb.Cost
	}
	return h.ids[a] < h.ids[b]
}
func (h *readyHeap[F]) Swap(a, b int) { h.ids[a], h.ids[b] = h.ids[b], h.ids[a] }
func (h *readyHeap[F]) Push(x any)    { h.ids = append(h.ids, x.(int)) }
func (h *readyHeap[F]) Pop() any {
	n := len(h.ids) - 1
	id := h.ids[n]
	h.ids = h.ids[:n]
	return id
}

// take removes and returns the first ready task, in heap order, whose
// locks do not conflict with the running tasks', or false if there is none.
// A task passed over is parked on the lock key it waits for, and goes back
// to the heap when a lock on that key is released (release): so a ready
// task is looked at again only when it may have become startable, not on
// every call, which made thousands of foreign keys waiting for DDLMutex
// quadratic.
func (s *state[F]) take() (int, bool) {
	for s.ready.Len() > 0 {
		i := heap.Pop(&s.ready).(int)
		s.looks++
		t := s.g.Tasks[i]
		key, ok := s.blocker(t)
		if ok {
			return i, true
		}
		p := s.parked[key]
		if p == nil {
			p = &readyHeap[F]{tasks: s.g.Tasks}
			s.parked[key] = p
		}
		heap.Push(p, i)
		if key != DDLMutex {
			// DDLMutex wakes one waiter at a time (release): if this
			// one cannot start for another reason, the next one may.
			for _, l := range t.Locks {
				if l.Key == DDLMutex {
					s.wake(DDLMutex, 1)
					break
				}
			}
		}
	}
	return 0, false
}

// wake moves up to n of the tasks parked on key back to the ready heap
// (n < 0: all of them).
func (s *state[F]) wake(key string, n int) {
	p := s.parked[key]
	for p != nil && p.Len() > 0 && n != 0 {
		heap.Push(&s.ready, heap.Pop(p).(int))
		n--
	}
}

// next blocks until a task can start and takes its locks, or returns false
// when every task is done or the run failed or was cancelled.
func (s *state[F]) next(ctx context.Context) (int, bool) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.failed = true
		s.mu.Unlock()
		s.cond.Broadcast()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.failed || s.left == 0 {
			return 0, false
		}
		if i, ok := s.take(); ok {
			t := s.g.Tasks[i]
			for _, l := range t.Locks {
				s.held[l.Key] = append(s.held[l.Key], l.Mode)
			}
			if t.Kind == Data && t.Table != "" {
				s.loading[t.Table]++
			}
			return i, true
		}
		s.cond.Wait()
	}
}

// blocker returns the key of t's first lock that conflicts with a held
// one, or true if t can take all its locks.
func (s *state[F]) blocker(t *Task[F]) (string, bool) {
	if t.Kind == Data && t.Table != "" && s.g.MaxPerTable > 0 && s.loading[t.Table] >= s.g.MaxPerTable {
		return t.Table, false
	}
	for _, l := range t.Locks {
		for _, h := range s.held[l.Key] {
			if Conflicts(l.Mode, h) {
				return l.Key, false
			}
		}
	}
	return "", true
}

// finish releases a task's locks and readies the tasks waiting on it.
func (s *state[F]) finish(i int, tm Timing, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cond.Broadcast()
	s.timings = append(s.timings, tm)
	if t := s.g.Tasks[i]; t.Kind == Data && t.Table != "" {
		if s.loading[t.Table]--; s.loading[t.Table] == 0 {
			delete(s.loading, t.Table)
		}
		s.wake(t.Table, -1) // its loads held back by MaxPerTable
	}
	for _, l := range s.g.Tasks[i].Locks {
		h := s.held[l.Key]
		for k, m := range h {
			if m == l.Mode {
				s.held[l.Key] = append(h[:k], h[k+1:]...)
				break
			}
		}
		// Every task DDLMutex parked waits for it alone, and only one
		// can have it: wake one (take wakes the next if that one
		// waits for something else too). Any other key's release may
		// let all its waiters start.
		if l.Key == DDLMutex {
			s.wake(l.Key, 1)
		} else {
			s.wake(l.Key, -1)
		}
	}
	if err != nil && !s.keepGoing {
		s.failed = true
		return
	}
	s.left--
	if err != nil {
		s.skipUsers(i, err)
		return
	}
	for _, u := range s.users[i] {
		if s.skipped[u] {
			continue
		}
		if s.pending[u]--; s.pending[u] == 0 {
			heap.Push(&s.ready, u)
		}
	}
}

// skipUsers records task i's failure and leaves out every task that
// depends on it, directly or through others, unless another failure
// already did.
func (s *state[F]) skipUsers(i int, err error) {
	if s.skipped == nil {
		s.skipped = map[int]bool{}
	}
	f := Failure{Task: i, Err: err}
	stack := append([]int(nil), s.users[i]...)
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s.skipped[u] {
			continue
		}
		s.skipped[u] = true
		s.left--
		f.Skipped = append(f.Skipped, u)
		stack = append(stack, s.users[u]...)
	}
	slices.Sort(f.Skipped)
	s.failures = append(s.failures, f)
}
