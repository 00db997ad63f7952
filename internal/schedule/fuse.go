package schedule

import "slices"

// Fused is a task merged into a small table's load by FuseSmallTables: the
// executor runs its statements after the load, in the load's transaction,
// and records its journal step there too.
type Fused struct {
	Name string
	Kind Kind
	Step string
	SQL  []string
}

// FuseSmallTables returns g with the work of each small table merged into
// its load: a table loaded by one task of cost under maxCost that holds the
// table's ACCESS EXCLUSIVE lock (a table this restore created, loaded
// whole) takes into its Then the index, constraint and ANALYZE tasks that
// touch that table alone and depend on nothing but its load and each other,
// in graph order. For thousands of small tables this turns five or six
// transactions, scheduler turns and round trips per table into one; the
// fused steps commit with the load or not at all, so a resumed restore
// finds all of them done or none (or, after an earlier unfused run, some:
// the executor runs the Then tasks whose steps are not done). Foreign keys
// (two tables) and the tasks that wait for them stay apart.
// Tasks that depended on a merged task depend on the load instead. g is
// changed in place and returned.
func FuseSmallTables(g *Graph, maxCost int64) *Graph {
	// into[k] is the load a table key's tasks fuse into; owner[i] the load
	// task i was merged into, or -1.
	into := fusableLoads(g, maxCost)
	if len(into) == 0 {
		return g
	}
	owner := make([]int, len(g.Tasks))
	for i := range owner {
		owner[i] = -1
	}
	fused := 0
	for i, t := range g.Tasks {
		if load, ok := fusable(t, into, func(d int) int { return owner[d] }); ok {
			owner[i] = load
			fused++
		}
	}
	if fused == 0 {
		return g
	}
	// g is rewritten in place: with 100,000 tables a copy of the graph
	// is tens of MB at the restore's peak of memory.
	index := make([]int, len(g.Tasks)) // old index -> new, for kept tasks
	n := 0
	for i := range g.Tasks {
		if owner[i] < 0 {
			index[i] = n
			n++
		}
	}
	for i, t := range g.Tasks {
		if o := owner[i]; o >= 0 {
			l := g.Tasks[o]
			l.Then = append(l.Then, Fused{Name: t.Name, Kind: t.Kind, Step: t.Step, SQL: t.SQL})
			continue
		}
		t.Deps = remap(t.Deps, func(d int) int {
			if owner[d] >= 0 {
				d = owner[d]
			}
			return index[d]
		})
	}
	kept := g.Tasks[:0]
	for i, t := range g.Tasks {
		if owner[i] < 0 {
			kept = append(kept, t)
		}
	}
	clear(g.Tasks[len(kept):]) // the merged tasks, for the collector
	g.Tasks = kept
	return g
}

// fusableLoads maps the lock key of each table that a small table's tasks
// may fuse into to its load: the table's only load, of cost under
// maxCost, holding the table's ACCESS EXCLUSIVE lock alone.
func fusableLoads(g *Graph, maxCost int64) map[string]int {
	loads := map[string][]int{}
	for i, t := range g.Tasks {
		if t.Kind == Data && t.Table != "" {
			loads[t.Table] = append(loads[t.Table], i)
		}
	}
	into := map[string]int{}
	for key, ls := range loads {
		t := g.Tasks[ls[0]]
		if len(ls) == 1 && t.Cost < maxCost && len(t.Locks) == 1 && t.Locks[0] == (Lock{key, AccessExclusive}) {
			into[key] = ls[0]
		}
	}
	return into
}

// fusable returns the load (of into) that task t fuses into: an index,
// constraint or ANALYZE task with statements, locking that load's table
// alone, depending on nothing but the load and tasks fused into it
// (owner: the load a task was fused into, or -1).
func fusable(t *Task, into map[string]int, owner func(int) int) (int, bool) {
	switch t.Kind {
	case Index, Constraint, Analyze:
	default:
		return 0, false
	}
	if len(t.SQL) == 0 || len(t.Locks) == 0 {
		return 0, false
	}
	key := t.Locks[0].Key
	load, ok := into[key]
	if !ok {
		return 0, false
	}
	for _, l := range t.Locks {
		if l.Key != key {
			return 0, false
		}
	}
	for _, d := range t.Deps {
		if d != load && owner(d) != load {
			return 0, false
		}
	}
	return load, true
}

// remap maps every element of deps through f, in place, leaving out
// repeats (keeping each first one).
func remap(deps []int, f func(int) int) []int {
	out := deps[:0]
	var seen map[int]bool
	if len(deps) > 16 {
		seen = make(map[int]bool, len(deps))
	}
	for _, d := range deps {
		d = f(d)
		switch {
		case seen != nil:
			if seen[d] {
				continue
			}
			seen[d] = true
		case slices.Contains(out, d):
			continue
		}
		out = append(out, d)
	}
	return out
}
