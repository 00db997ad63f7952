package restore

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// defaultPreDataSplitMin is Options.PreDataSplitMin's default: the fewest
// entries one level of pre-data's dependency order must hold to be split
// over several pg_restore runs. Each run starts a pg_restore that reads the
// archive's whole table of contents (tens of milliseconds with 10,000
// tables) and each CREATE TABLE costs the server about 1.75 ms, so a level
// of 200 saves a few hundred milliseconds on 2 connections; a schema of
// tens of tables keeps the single run it always had.
const defaultPreDataSplitMin = 200

// preDataStep is one step of a split pre-data: one pg_restore --use-list
// run per element of runs, all at once on their own connections; the steps
// run one after the other.
type preDataStep struct {
	runs   [][]int // each run's dump IDs, in the archive's order
	create bool    // the step that creates the database (pg_restore --create)
}

// preDataSplitOptions are what splitPreData needs of the restore's options.
type preDataSplitOptions struct {
	jobs     int  // connections: at most this many runs per step
	splitMin int  // the fewest entries a level needs to be split (> 0)
	create   bool // --create: the database-wide entries come first
}

// lockFree reports whether entries depend on objects of the catalog
// class (a pg_class OID) without locking them: a CREATE TABLE in a schema,
// with a column of a type or a default calling a function, takes no lock
// on them that another CREATE waits for (the schema's is shared).
// Relations (pg_class) and everything else are locked, or may be.
func lockFree(class uint32) bool {
	switch class {
	case 2615, // pg_namespace
		3079,             // pg_extension
		1247,             // pg_type
		1255,             // pg_proc
		3456,             // pg_collation
		2612,             // pg_language
		2616, 2617, 2753, // pg_opclass, pg_operator, pg_opfamily
		3600, 3601, 3602, 3764, // text search dictionaries, parsers, configurations, templates
		1417, 2328: // pg_foreign_server, pg_foreign_data_wrapper
		return true
	}
	return false
}

const typeClass = 1247 // pg_type

// splitPreData splits the pre-data entries (those of one selection, as
// toc.ParseWhole reads them; order is their dump IDs in the archive's
// order) into steps that pg_restore runs can take at once, or returns nil
// when one pg_restore run of them all is the plan: when no level of the
// dependency order is big enough to be worth more runs.
//
// The plan:
//   - With --create, the database's own entries (DATABASE, DATABASE
//     PROPERTIES, and the comment, security label and privileges of the
//     database, which pg_restore restores only with --create) come first,
//     in the step that runs pg_restore --create.
//   - The others are ordered by level: an entry's level is one more than
//     the highest of the entries it depends on (toc.Entry.Deps). Entries of
//     one level never depend on each other, so a level of at least
//     splitMin entries is split over up to jobs runs; smaller levels next
//     to each other share one run, in the archive's order (pg_dump's
//     order, which puts every entry after what it depends on).
//   - The entries pg_restore keeps for its last passes (privileges, default
//     privileges: ALTER DEFAULT PRIVILEGES must not apply to the objects
//     created after it) come after all the others, by level likewise.
//
// Within a split level, entries that could wait on each other's locks go
// to the same run, so that no two runs ever wait on each other (pg_restore
// --transaction-size holds every lock of up to 100 entries until its
// commit: two runs each waiting on the other would deadlock). The rule:
// two entries share a run when they depend on the same entry (the same
// parent table for inheritance children and partitions, the same table for
// ATTACH, comments, security labels, defaults and sequence OWNED BY, the
// same sequence, the same object for comments on it), except that a
// dependency of an object's own entry on a schema, extension, type,
// function, collation, language, operator, text search or foreign-data
// object (lockFree) does not count: CREATE takes no lock on those
// that another waits for. Tables, views, sequences and types whose implicit
// array types' names could collide (a table "t" makes type "_t", which a
// table "_t" also wants; pg_type's unique index would make one of two
// concurrent creations fail) share a run too (arrayNameKey).
func splitPreData(entries []toc.Entry, order []int, o preDataSplitOptions) []preDataStep {
	if o.jobs < 2 || o.splitMin < 1 || len(entries) < o.splitMin {
		return nil
	}
	pos := make(map[int]int, len(order))
	for i, id := range order {
		pos[id] = i
	}
	byID := make(map[int]*toc.Entry, len(entries))
	var first, main, last []*toc.Entry
	for i := range entries {
		e := &entries[i]
		byID[e.ID] = e
		switch {
		case databaseEntry(e):
			if o.create {
				first = append(first, e)
			}
			// Without --create, pg_restore skips them.
		case lastPass(e):
			last = append(last, e)
		default:
			main = append(main, e)
		}
	}
	if o.create && !slices.ContainsFunc(first, func(e *toc.Entry) bool { return e.Type == "DATABASE" }) {
		return nil // pg_restore --create without a database to create: as ever
	}
	mainLevels, ok := levelsOf(main)
	if !ok {
		return nil
	}
	lastLevels, ok := levelsOf(last)
	if !ok {
		return nil
	}
	var steps []preDataStep
	serial := func(es []*toc.Entry) {
		if len(es) == 0 {
			return
		}
		if n := len(steps); n > 0 && len(steps[n-1].runs) == 1 {
			steps[n-1].runs[0] = append(steps[n-1].runs[0], ids(es)...)
			return
		}
		steps = append(steps, preDataStep{runs: [][]int{ids(es)}})
	}
	serial(first)
	split := false
	for _, level := range slices.Concat(mainLevels, lastLevels) {
		groups := groupByLocks(level, byID)
		if len(level) < o.splitMin || len(groups) < 2 {
			serial(level)
			continue
		}
		steps = append(steps, preDataStep{runs: spread(groups, o.jobs)})
		split = true
	}
	if !split {
		return nil
	}
	if o.create {
		steps[0].create = true
	}
	for _, s := range steps {
		for _, r := range s.runs {
			slices.SortFunc(r, func(a, b int) int { return cmp.Compare(pos[a], pos[b]) })
		}
	}
	return steps
}

// databaseEntry reports whether e is one pg_restore restores only with
// --create: the database itself, its properties, and its comment,
// security label and privileges.
func databaseEntry(e *toc.Entry) bool {
	switch e.Type {
	case "DATABASE", "DATABASE PROPERTIES":
		return true
	case "ACL", "COMMENT", "SECURITY LABEL":
		return strings.HasPrefix(e.Name, "DATABASE ")
	}
	return false
}

// lastPass reports whether pg_restore restores e after all the others
// (its ACL and post-ACL passes).
func lastPass(e *toc.Entry) bool {
	switch e.Type {
	case "ACL", "ACL LANGUAGE", "DEFAULT ACL", "EVENT TRIGGER", "MATERIALIZED VIEW DATA":
		return true
	case "COMMENT":
		return strings.HasPrefix(e.Name, "EVENT TRIGGER ")
	}
	return false
}

// levelsOf orders entries by level: the entries that depend on none of
// the others, then those that depend only on the first, and so on; false
// if the dependencies have a cycle (pg_dump breaks them, so this is a
// table of contents the planner leaves to one pg_restore run).
func levelsOf(entries []*toc.Entry) ([][]*toc.Entry, bool) {
	in := make(map[int]*toc.Entry, len(entries))
	for _, e := range entries {
		in[e.ID] = e
	}
	level := make(map[int]int, len(entries))
	const visiting = -1
	var visit func(e *toc.Entry) bool
	visit = func(e *toc.Entry) bool {
		switch l, seen := level[e.ID]; {
		case seen && l == visiting:
			return false
		case seen:
			return true
		}
		level[e.ID] = visiting
		l := 0
		for _, d := range e.Deps {
			dep, ok := in[d]
			if !ok {
				continue // not restored here, or restored before
			}
			if !visit(dep) {
				return false
			}
			l = max(l, level[d]+1)
		}
		level[e.ID] = l
		return true
	}
	var out [][]*toc.Entry
	for _, e := range entries {
		if !visit(e) {
			return nil, false
		}
		l := level[e.ID]
		for len(out) <= l {
			out = append(out, nil)
		}
		out[l] = append(out[l], e)
	}
	return out, true
}

// groupByLocks partitions the entries of one level into the groups
// splitPreData's rule keeps in one run, each in the level's order.
func groupByLocks(level []*toc.Entry, byID map[int]*toc.Entry) [][]*toc.Entry {
	parent := make([]int, len(level))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[string]int{}
	join := func(key string, i int) {
		if j, ok := owner[key]; ok {
			parent[find(i)] = find(j)
			return
		}
		owner[key] = i
	}
	for i, e := range level {
		for _, d := range e.Deps {
			if dep, ok := byID[d]; ok && e.Class != 0 && lockFree(dep.Class) {
				continue
			}
			join("dep "+strconv.Itoa(d), i)
		}
		if e.Class == relationClass || e.Class == typeClass {
			join("name "+e.Schema+"\x00"+arrayNameKey(e.Name), i)
		}
	}
	at := map[int]int{}
	var groups [][]*toc.Entry
	for i, e := range level {
		r := find(i)
		g, ok := at[r]
		if !ok {
			g = len(groups)
			at[r] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], e)
	}
	return groups
}

// arrayNameKey is what two relations or types of one schema have in common
// when the array type PostgreSQL names after one ("_" and the name, cut to
// 63 bytes, more underscores while taken) can take the name of the other
// or of its array type: the name without its leading underscores, cut to
// 40 bytes (names that collide agree on more than that, but for names
// starting with over 20 underscores).
func arrayNameKey(name string) string {
	k := strings.TrimLeft(name, "_")
	if len(k) > 40 {
		k = k[:40]
	}
	return k
}

// spread deals groups out to at most jobs runs, biggest first to the run
// with the fewest entries so far, so that the runs finish together.
func spread(groups [][]*toc.Entry, jobs int) [][]int {
	slices.SortStableFunc(groups, func(a, b []*toc.Entry) int { return cmp.Compare(len(b), len(a)) })
	runs := make([][]int, min(jobs, len(groups)))
	for _, g := range groups {
		least := 0
		for i := range runs {
			if len(runs[i]) < len(runs[least]) {
				least = i
			}
		}
		runs[least] = append(runs[least], ids(g)...)
	}
	return runs
}

// ids are the dump IDs of entries.
func ids(entries []*toc.Entry) []int {
	out := make([]int, len(entries))
	for i, e := range entries {
		out[i] = e.ID
	}
	return out
}
