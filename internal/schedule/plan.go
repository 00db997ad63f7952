package schedule

import (
	"fmt"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// TableFacts is what the planner knows about a table whose rows the
// restore loads.
type TableFacts struct {
	Loads []int // tasks that load its rows
	Size  int64 // bytes of data, the cost estimate of its indexes
}

// PlanOptions configure the post-data plan.
type PlanOptions struct {
	// Tables maps TableKey(schema, name) to the table's load tasks; a table
	// not in it (partitioned parent, materialized view) has no rows to wait
	// for.
	Tables  map[string]TableFacts
	Analyze bool // add an ANALYZE task per loaded table
	// Statistics are the loaded tables whose optimizer statistics the
	// restore brings back from the archive: they are not analyzed.
	Statistics map[string]bool
	// SmallBytes is the size under which a table is small: a foreign key
	// between two small tables is added checked, by pg_dump's own
	// statement, in one task, rather than NOT VALID and then validated in
	// a second (two transactions and round trips, for a check that takes
	// less than either). 0: no table is small.
	SmallBytes int64
	// Done reports the journal steps an earlier run of the restore
	// finished (nil: none). A foreign key an earlier run added NOT VALID
	// keeps its two tasks, so that it is validated.
	Done func(step string) bool
	// FuseBytes, if not 0, fuses the tasks of each table loaded by one
	// task of cost under it into that load as they are planned, as
	// FuseSmallTables(g, FuseBytes) would after: with 100,000 tables, the
	// half a million tasks planned apart and then merged were the
	// restore's peak of memory, twice what the fused graph holds.
	FuseBytes int64
}

// item is one post-data entry and the tasks it became.
type item struct {
	e      *toc.Entry
	tables []string // lock keys of the tables its statements touch
	rest   bool     // left to pg_restore
	build  func(p *planner) []int
	last   int // its final task
}

type planner struct {
	g     *Graph
	opts  PlanOptions
	items []*item
	byID  map[int]*item
	// byTable lists the index and constraint tasks of each table, which
	// foreign keys and ANALYZE wait for.
	byTable map[string][]int
	touched map[string][]int // every task touching a table
	into    map[string]int   // loads that tasks fuse into as planned (fusableLoads)
}

// PlanPostData adds the post-data entries of script to g: indexes,
// PRIMARY KEY and UNIQUE constraints (built as unique indexes, then
// attached), foreign keys (added NOT VALID, then validated; between two
// small tables added checked at once), partition index
// attachments, ANALYZE per table, and one final task that hands every other
// entry to pg_restore in pg_dump's order. It returns the index of that
// final task. Any entry whose shape it does not recognise is left to
// pg_restore, as is everything that depends on such an entry.
func PlanPostData(g *Graph, script *toc.Script, opts PlanOptions) (int, error) {
	p := &planner{g: g, opts: opts, byID: map[int]*item{}, byTable: map[string][]int{}, touched: map[string][]int{}}
	if opts.FuseBytes > 0 {
		p.into = fusableLoads(g, opts.FuseBytes)
	}
	for i := range script.Entries {
		it := &item{e: &script.Entries[i], last: -1}
		p.classify(it)
		p.items = append(p.items, it)
		p.byID[it.e.ID] = it
	}
	// What depends on an entry left to pg_restore is left to it too.
	for changed := true; changed; {
		changed = false
		for _, it := range p.items {
			if it.rest {
				continue
			}
			for _, d := range it.e.Deps {
				if dep, ok := p.byID[d]; ok && dep.rest {
					it.rest, changed = true, true
					break
				}
			}
		}
	}
	var ours []int
	for _, it := range p.items {
		if it.rest {
			continue
		}
		ids := it.build(p)
		it.last = ids[len(ids)-1]
		ours = append(ours, ids...)
	}

	var restIDs []int
	statistics := false
	for _, it := range p.items {
		if it.rest {
			restIDs = append(restIDs, it.e.ID)
			statistics = statistics || it.e.Type == "STATISTICS"
		}
	}
	rest := &Task{Name: fmt.Sprintf("pg_restore of %d other post-data entries", len(restIDs)), Step: "rest of post-data", Kind: Rest,
		Deps: remap(ours, func(d int) int { return d }), Entries: restIDs, Locks: []Lock{{DDLMutex, AccessExclusive}}}
	for key := range opts.Tables {
		rest.Locks = append(rest.Locks, Lock{key, AccessExclusive})
	}
	restID := g.Add(rest)
	if opts.Analyze {
		for key, f := range opts.Tables {
			if opts.Statistics[key] {
				continue
			}
			// After the table's indexes and constraints (an expression
			// index has statistics of its own), not after its foreign
			// keys, which change nothing ANALYZE reads: so a small table's
			// ANALYZE can run in its load's transaction (FuseSmallTables).
			deps := append([]int{}, f.Loads...)
			for _, t := range p.touched[key] {
				if g.Tasks[t].Kind != ForeignKey {
					deps = append(deps, t)
				}
			}
			if statistics {
				// Extended statistics are built by ANALYZE only once
				// CREATE STATISTICS has run.
				deps = append(deps, restID)
			}
			schema, name, _ := strings.Cut(key, "\x00")
			p.place(&Task{Name: "analyze " + schema + "." + name, Step: fmt.Sprintf("analyze %q %q", schema, name), Kind: Analyze, Cost: f.Size, Deps: deps,
				Locks: []Lock{{key, ShareUpdateExclusive}}, Table: key, SQL: []string{"ANALYZE " + pg.Qualified(schema, name)}})
		}
	}
	return restID, nil
}

// add creates a task touching the item's tables, depending on their loads
// and on the tasks of the entries the item depends on.
func (p *planner) add(it *item, t *Task, extra ...int) int {
	for _, key := range it.tables {
		t.Deps = append(t.Deps, p.opts.Tables[key].Loads...)
	}
	for _, d := range it.e.Deps {
		if dep, ok := p.byID[d]; ok && dep.last >= 0 {
			t.Deps = append(t.Deps, dep.last)
		}
	}
	t.Deps = append(t.Deps, extra...)
	id := p.place(t)
	for _, key := range it.tables {
		p.touched[key] = append(p.touched[key], id)
	}
	return id
}

// place adds t to the graph and returns its index, or, if it fuses into
// a small table's load (opts.FuseBytes), appends it to the load's Then
// and returns the load's index: what depends on t depends on the load.
func (p *planner) place(t *Task) int {
	if p.into != nil {
		if load, ok := fusable(t, p.into, func(int) int { return -1 }); ok {
			l := p.g.Tasks[load]
			l.Then = append(l.Then, Fused{Name: t.Name, Kind: t.Kind, Step: t.Step, SQL: t.SQL})
			return load
		}
	}
	return p.g.Add(t)
}

func (p *planner) loaded(key string) bool {
	_, ok := p.opts.Tables[key]
	return ok
}

// small reports whether a loaded table is under opts.SmallBytes.
func (p *planner) small(key string) bool {
	return p.loaded(key) && p.opts.Tables[key].Size < p.opts.SmallBytes
}

// done reports whether an earlier run finished a step.
func (p *planner) done(step string) bool {
	return p.opts.Done != nil && p.opts.Done(step)
}

func (p *planner) cost(keys ...string) int64 {
	var c int64
	for _, k := range keys {
		c += p.opts.Tables[k].Size
	}
	return c
}

func locks(mode LockMode, keys ...string) []Lock {
	var l []Lock
	for _, k := range keys {
		l = append(l, Lock{k, mode})
	}
	return l
}

// step is the journal step of an entry's task: the role of the task and
// the entry's dump ID, which is the same in every run of one archive.
func step(role string, e *toc.Entry) string {
	return fmt.Sprintf("%s %d", role, e.ID)
}

// withSettings prefixes an entry's session settings to a statement list.
func withSettings(e *toc.Entry, stmts ...string) []string {
	return append(append([]string{}, e.Settings...), stmts...)
}

func texts(stmts []toc.Statement) []string {
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = s.Text
	}
	return out
}

// classify decides how an entry is restored and sets it.build.
func (p *planner) classify(it *item) {
	it.rest = true
	e := it.e
	switch e.Type {
	case "INDEX", "CONSTRAINT", "CHECK CONSTRAINT", "FK CONSTRAINT", "INDEX ATTACH":
	default:
		return
	}
	stmts, err := toc.Statements(e.SQL)
	if err != nil || len(stmts) == 0 {
		return
	}
	// The closures below keep only the statements' texts: the tokens
	// are dropped as soon as the entry is classified (with 100,000
	// tables they outweigh the whole plan).
	first := stmts[0].Tokens
	sql := texts(stmts)
	switch e.Type {
	case "INDEX":
		key, ok := indexTable(first)
		if !ok {
			return
		}
		it.tables, it.rest = []string{key}, false
		it.build = func(p *planner) []int {
			b := p.add(it, &Task{Name: "index " + e.Name, Step: step("index", e), Kind: Index, Cost: p.cost(key),
				SQL: withSettings(e, sql[0]), Locks: locks(Share, key)})
			p.byTable[key] = append(p.byTable[key], b)
			if len(sql) == 1 {
				return []int{b}
			}
			m := p.add(it, &Task{Name: "index markers " + e.Name, Step: step("index markers", e), Kind: Index, Cost: p.cost(key),
				SQL: withSettings(e, sql[1:]...), Locks: locks(AccessExclusive, key)}, b)
			p.byTable[key] = append(p.byTable[key], m)
			return []int{b, m}
		}
	case "CONSTRAINT", "CHECK CONSTRAINT":
		key, ok := alterTable(first)
		if !ok || !only(first) {
			return // without ONLY it may recurse into child tables: pg_restore's job
		}
		it.tables, it.rest = []string{key}, false
		if uc, ok := parseUniqueConstraint(first); ok && p.loaded(key) && e.Type == "CONSTRAINT" {
			it.build = func(p *planner) []int {
				b := p.add(it, &Task{Name: "unique index " + e.Name, Step: step("unique index", e), Kind: Index, Cost: p.cost(key),
					SQL: withSettings(e, uc.createIndex()), Locks: locks(Share, key)})
				a := p.add(it, &Task{Name: "constraint " + e.Name, Step: step("constraint", e), Kind: Constraint, Cost: p.cost(key),
					SQL:   withSettings(e, append([]string{uc.attach()}, sql[1:]...)...),
					Locks: locks(AccessExclusive, key)}, b)
				p.byTable[key] = append(p.byTable[key], b, a)
				return []int{b, a}
			}
			return
		}
		it.build = func(p *planner) []int {
			l := locks(AccessExclusive, key)
			if !p.loaded(key) {
				l = append(l, Lock{DDLMutex, AccessExclusive})
			}
			a := p.add(it, &Task{Name: "constraint " + e.Name, Step: step("constraint", e), Kind: Constraint, Cost: p.cost(key),
				SQL: withSettings(e, sql...), Locks: l})
			p.byTable[key] = append(p.byTable[key], a)
			return []int{a}
		}
	case "FK CONSTRAINT":
		fk, ok := parseForeignKey(stmts[0])
		if !ok || len(stmts) != 1 || !p.loaded(fk.table) || !p.loaded(fk.refTable) {
			return
		}
		it.tables, it.rest = []string{fk.table, fk.refTable}, false
		it.build = func(p *planner) []int {
			var before []int
			before = append(append(before, p.byTable[fk.table]...), p.byTable[fk.refTable]...)
			addSQL := fk.addNotValid()
			checked := p.small(fk.table) && p.small(fk.refTable) && !p.done(step("foreign key", e))
			if fk.notValid || checked {
				addSQL = sql[0]
			}
			// Both tables hold data, so neither is partitioned: ADD
			// FOREIGN KEY locks these two (and the key's index) and no
			// other table, and the declared locks keep conflicting
			// tasks apart. No DDLMutex, which made 3,333 foreign keys
			// between 10,000 small tables run one at a time.
			a := p.add(it, &Task{Name: "foreign key " + e.Name, Step: step("foreign key", e), Kind: ForeignKey, Cost: p.cost(fk.table),
				SQL:   withSettings(e, addSQL),
				Locks: locks(ShareRowExclusive, fk.table, fk.refTable)}, before...)
			if fk.notValid || checked {
				return []int{a}
			}
			v := p.add(it, &Task{Name: "validate " + e.Name, Step: step("validate", e), Kind: ForeignKey, Cost: p.cost(fk.table, fk.refTable),
				SQL:   withSettings(e, fk.validate()),
				Locks: []Lock{{fk.table, ShareUpdateExclusive}, {fk.refTable, RowShare}}}, a)
			return []int{a, v}
		}
	case "INDEX ATTACH":
		if len(stmts) != 1 || !isAttach(first) {
			return
		}
		it.rest = false
		it.build = func(p *planner) []int {
			seen := map[string]bool{}
			for _, d := range e.Deps {
				if dep, ok := p.byID[d]; ok {
					for _, k := range dep.tables {
						if !seen[k] {
							seen[k] = true
							it.tables = append(it.tables, k)
						}
					}
				}
			}
			l := append(locks(AccessExclusive, it.tables...), Lock{DDLMutex, AccessExclusive})
			return []int{p.add(it, &Task{Name: "attach " + e.Name, Step: step("attach", e), Kind: Index, SQL: withSettings(e, sql[0]), Locks: l})}
		}
	}
}
