package schedule

import (
	"fmt"
	"slices"

	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// TableFacts is what the planner knows about a table whose rows the
// restore loads.
type TableFacts struct {
	Loads []int // tasks that load its rows
	Size  int64 // bytes of data, the cost estimate of its indexes
}

// PostDataOptions configure the post-data plan.
type PostDataOptions struct {
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
	// FuseBytes, if not 0, fuses into the load of each table loaded by
	// one task of cost under it (and holding its ACCESS EXCLUSIVE lock:
	// a table this restore created, loaded whole) the index, constraint
	// and ANALYZE tasks that touch that table alone and wait for nothing
	// else, in plan order, as they are planned (Fused). For thousands of
	// small tables this turns five or six transactions, scheduler turns
	// and round trips per table into one; the fused steps commit with the
	// load or not at all. Foreign keys (two tables) stay apart.
	FuseBytes int64
}

// item is one post-data entry while it is planned.
type item struct {
	e      *toc.Entry
	tables []string // lock keys of the tables its statements touch
	rest   bool     // left to pg_restore
	build  func(p *planner) []int
}

// entries is what the planner keeps of the script's entries, by dump ID,
// in parallel slices over the IDs in order (a map of 300,000 entries with
// room to grow weighed three times as much): each entry's final task, or
// that it was left to pg_restore or not planned yet, and, for the
// attachments that may depend on an index or constraint, its table.
type entries struct {
	ids   []int32 // sorted
	last  []int32
	table []string // the lock key of an index's or constraint's table
}

// Marks of entries.last for entries that have no task.
const (
	lastRest    = -1 // left to pg_restore
	lastPending = -2 // in the script, not planned yet
)

func newEntries(ids []int) *entries {
	es := &entries{ids: make([]int32, len(ids)), last: make([]int32, len(ids)), table: make([]string, len(ids))}
	for i, id := range ids {
		es.ids[i] = int32(id)
		es.last[i] = lastPending
	}
	slices.Sort(es.ids)
	return es
}

// find returns the position of dump ID id, or false if it is not one of
// the script's entries.
func (es *entries) find(id int) (int, bool) {
	return slices.BinarySearch(es.ids, int32(id))
}

// lastOf returns the final task of entry id (or lastRest, lastPending),
// or false if id is not one of the script's entries.
func (es *entries) lastOf(id int) (int, bool) {
	i, ok := es.find(id)
	if !ok {
		return 0, false
	}
	return int(es.last[i]), true
}

// set records what became of entry id.
func (es *entries) set(id, last int, table string) {
	if i, ok := es.find(id); ok {
		es.last[i], es.table[i] = int32(last), table
	}
}

type planner struct {
	g    *Graph
	opts PostDataOptions
	// byID is every entry of the script, planned or not yet.
	byID *entries
	// byTable lists the index and constraint tasks of each table, which
	// foreign keys wait for.
	byTable map[string][]int
	touched map[string][]int // every task touching a table
	ours    []int            // the tasks of the entries planned here
	restIDs []int            // the entries left to pg_restore, in order
	// statistics says an entry left to pg_restore is extended statistics
	// (CREATE STATISTICS), which the ANALYZE tasks must wait for.
	statistics bool
	firstTask  int // g's first task added by the plan (Abandon)
	// lastSettings is the session settings fused tasks point to last
	// (sharedSettings).
	lastSettings *[]string
}

// PostData lays out post-data entries as they are read: each entry of
// pg_restore's script becomes tasks (or is left to pg_restore) as soon as
// it comes, and only its task ids stay, so that the entries of 100,000
// tables, which weigh more than the plan made of them, are never all held.
type PostData struct {
	p *planner
}

// NewPostData starts the post-data plan of a script whose entries are
// ids (pg_restore --list's order, which is the script's), adding its tasks
// to g.
func NewPostData(g *Graph, ids []int, opts PostDataOptions) *PostData {
	p := &planner{g: g, opts: opts, byID: newEntries(ids), byTable: map[string][]int{},
		touched: map[string][]int{}, firstTask: len(g.Tasks)}
	return &PostData{p: p}
}

// Add plans the script's next entry: its tasks, which depend on the tasks
// of the entries before it. pg_dump orders its entries after what they
// depend on, so an entry depends only on entries already planned; one that
// depends on an entry left to pg_restore, or on one of the script not yet
// planned, is left to pg_restore too, which runs after every task of the
// plan and in pg_dump's order.
func (pp *PostData) Add(e *toc.Entry) {
	p := pp.p
	it := &item{e: e}
	p.classify(it)
	for _, d := range e.Deps {
		if it.rest {
			break
		}
		if last, ok := p.byID.lastOf(d); ok && last < 0 {
			it.rest = true
		}
	}
	if it.rest {
		p.byID.set(e.ID, lastRest, "")
		p.restIDs = append(p.restIDs, e.ID)
		p.statistics = p.statistics || e.Type == "STATISTICS"
		return
	}
	ids := it.build(p)
	last := ids[len(ids)-1]
	table := ""
	if (e.Type == "INDEX" || e.Type == "CONSTRAINT") && len(it.tables) == 1 {
		table = it.tables[0] // what an INDEX ATTACH depending on it locks
	}
	p.byID.set(e.ID, last, table)
	for _, id := range ids {
		if n := len(p.ours); n == 0 || p.ours[n-1] != id {
			p.ours = append(p.ours, id)
		}
	}
}

// Abandon takes out of the graph everything the plan added to it, for a
// caller that cannot finish it (the script could not be read to its end)
// and leaves all of post-data to pg_restore instead.
func (pp *PostData) Abandon() {
	p := pp.p
	clear(p.g.Tasks[p.firstTask:])
	p.g.Tasks = p.g.Tasks[:p.firstTask]
	for _, f := range p.opts.Tables {
		for _, load := range f.Loads {
			p.g.Tasks[load].Then = nil // only this plan fuses
		}
	}
	pp.p = nil
}

// Finish adds the task that hands every entry left over to pg_restore, in
// pg_dump's order, and the ANALYZE tasks, and returns the index of the
// former.
func (pp *PostData) Finish() int {
	p, opts, g := pp.p, pp.p.opts, pp.p.g
	pp.p = nil
	rest := &Task{Name: fmt.Sprintf("pg_restore of %d other post-data entries", len(p.restIDs)), Step: "rest of post-data", Kind: taskgraph.Rest,
		Deps: remap(p.ours, func(d int) int { return d }), Entries: p.restIDs}
	if len(p.restIDs) > 0 {
		// With nothing to restore the task does nothing: no lock on
		// every table (100,000 of them, held by one task) for it.
		rest.Locks = []taskgraph.Lock{{Key: taskgraph.DDLMutex, Mode: taskgraph.AccessExclusive}}
		for key := range opts.Tables {
			rest.Locks = append(rest.Locks, taskgraph.Lock{Key: key, Mode: taskgraph.AccessExclusive})
		}
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
			// ANALYZE can run in its load's transaction (FuseBytes).
			deps := append([]int{}, f.Loads...)
			for _, t := range p.touched[key] {
				if g.Tasks[t].Kind != taskgraph.ForeignKey {
					deps = append(deps, t)
				}
			}
			if p.statistics {
				// Extended statistics are built by ANALYZE only once
				// CREATE STATISTICS has run.
				deps = append(deps, restID)
			}
			p.place(&spec{kind: taskgraph.Analyze, role: roleAnalyze, table: key, cost: f.Size, deps: deps,
				locks: []taskgraph.Lock{{Key: key, Mode: taskgraph.ShareUpdateExclusive}}})
		}
	}
	return restID
}

// addPostData adds the post-data entries of script to g: indexes,
// PRIMARY KEY and UNIQUE constraints (built as unique indexes, then
// attached), foreign keys (added NOT VALID, then validated; between two
// small tables added checked at once), partition index
// attachments, ANALYZE per table, and one final task that hands every other
// entry to pg_restore in pg_dump's order. It returns the index of that
// final task. Any entry whose shape it does not recognise is left to
// pg_restore, as is everything that depends on such an entry. It is
// PostData for a script already read whole.
func addPostData(g *Graph, script *toc.Script, opts PostDataOptions) (int, error) {
	ids := make([]int, len(script.Entries))
	for i, e := range script.Entries {
		ids[i] = e.ID
	}
	pp := NewPostData(g, ids, opts)
	for i := range script.Entries {
		pp.Add(&script.Entries[i])
	}
	return pp.Finish(), nil
}

// spec is a task of the plan before it is placed: a task of its own, or
// fused into its table's load.
type spec struct {
	kind  taskgraph.Group
	role  role
	e     *toc.Entry // the entry (none for ANALYZE)
	table string     // ANALYZE's table
	sql   []string   // statements, without the entry's session settings
	locks []taskgraph.Lock
	cost  int64
	deps  []int
}

// add places a task touching the item's tables, depending on their loads
// and on the tasks of the entries the item depends on.
func (p *planner) add(it *item, s spec, extra ...int) int {
	for _, key := range it.tables {
		s.deps = append(s.deps, p.opts.Tables[key].Loads...)
	}
	for _, d := range it.e.Deps {
		if last, ok := p.byID.lastOf(d); ok && last >= 0 {
			s.deps = append(s.deps, last)
		}
	}
	s.deps = append(s.deps, extra...)
	s.e = it.e
	id := p.place(&s)
	if !p.isLoad(id) {
		for _, key := range it.tables {
			p.touched[key] = append(p.touched[key], id)
		}
	}
	return id
}

// place adds the task s to the graph and returns its index, or, if it
// fuses into a small table's load (opts.FuseBytes), appends it to the
// load's Then and returns the load's index: what depends on it depends on
// the load.
func (p *planner) place(s *spec) int {
	if p.opts.FuseBytes > 0 {
		if load, ok := fusable(p.g, p.opts.Tables, p.opts.FuseBytes, s); ok {
			f := Fused{Kind: s.kind, role: s.role, tag: s.table, sql: s.sql}
			if s.e != nil {
				f.id, f.tag, f.settings = int32(s.e.ID), s.e.Name, p.sharedSettings(s.e)
			}
			l := p.g.Tasks[load]
			if l.Then == nil {
				// A primary key's two tasks, an index and ANALYZE
				// are the common case: no growing by 1, 2, 4.
				l.Then = make([]Fused, 0, 4)
			}
			l.Then = append(l.Then, f)
			return load
		}
	}
	// Tasks fused into a load all stand for it: one dependency on it.
	t := &Task{Kind: s.kind, Cost: s.cost, Deps: remap(s.deps, func(d int) int { return d }), Locks: s.locks}
	if s.role == roleAnalyze {
		t.Name, t.Step, t.Table, t.SQL = "analyze "+dotted(s.table), analyzeStep(s.table), s.table, []string{analyzeSQL(s.table)}
	} else {
		t.Name, t.Step, t.SQL = s.role.String()+" "+s.e.Name, entryStep(s.role, s.e.ID), withSettings(s.e, unique(s.role, s.sql)...)
	}
	return p.g.Add(t)
}

// sharedSettings is the entry's session settings, behind one pointer for
// all the entries that share them (toc gives the entries read under the
// same settings one slice): a fused task keeps 8 bytes of them.
func (p *planner) sharedSettings(e *toc.Entry) *[]string {
	if len(e.Settings) == 0 {
		return nil
	}
	if last := p.lastSettings; last != nil && len(*last) == len(e.Settings) && &(*last)[0] == &e.Settings[0] {
		return last
	}
	s := e.Settings
	p.lastSettings = &s
	return p.lastSettings
}

// isLoad reports whether task id is a table's load: the task a fused
// task became.
func (p *planner) isLoad(id int) bool {
	return id < p.firstTask && p.g.Tasks[id].Kind == taskgraph.Data
}

// onTable records index and constraint tasks of the table key, which its
// foreign keys wait for. A task fused into the table's load is not one:
// the foreign keys wait for the load anyway, and with 100,000 small
// tables the lists would be 100,000 of nothing else.
func (p *planner) onTable(key string, ids ...int) {
	for _, id := range ids {
		if !p.isLoad(id) {
			p.byTable[key] = append(p.byTable[key], id)
		}
	}
}

// canon returns the lock key of a loaded table as its load task holds
// it, so that the tasks and fused steps of 100,000 tables share one string
// per table instead of each holding one parsed from its statement.
func (p *planner) canon(key string) string {
	if f, ok := p.opts.Tables[key]; ok && len(f.Loads) > 0 {
		if k := p.g.Tasks[f.Loads[0]].Table; k == key {
			return k
		}
	}
	return key
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

func locks(mode taskgraph.LockMode, keys ...string) []taskgraph.Lock {
	var l []taskgraph.Lock
	for _, k := range keys {
		l = append(l, taskgraph.Lock{Key: k, Mode: mode})
	}
	return l
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
		key = p.canon(key)
		it.tables, it.rest = []string{key}, false
		it.build = func(p *planner) []int {
			b := p.add(it, spec{kind: taskgraph.Index, role: roleIndex, cost: p.cost(key), sql: sql[:1], locks: locks(taskgraph.Share, key)})
			p.onTable(key, b)
			if len(sql) == 1 {
				return []int{b}
			}
			m := p.add(it, spec{kind: taskgraph.Index, role: roleIndexMarkers, cost: p.cost(key), sql: sql[1:], locks: locks(taskgraph.AccessExclusive, key)}, b)
			p.onTable(key, m)
			return []int{b, m}
		}
	case "CONSTRAINT", "CHECK CONSTRAINT":
		key, ok := alterTable(first)
		if !ok || !only(first) {
			return // without ONLY it may recurse into child tables: pg_restore's job
		}
		key = p.canon(key)
		it.tables, it.rest = []string{key}, false
		if _, ok := parseUniqueConstraint(first); ok && p.loaded(key) && e.Type == "CONSTRAINT" {
			it.build = func(p *planner) []int {
				// Both keep pg_dump's statement; the index and the
				// attachment are made of it when they run (unique).
				b := p.add(it, spec{kind: taskgraph.Index, role: roleUniqueIndex, cost: p.cost(key), sql: sql, locks: locks(taskgraph.Share, key)})
				a := p.add(it, spec{kind: taskgraph.Constraint, role: roleUniqueAttach, cost: p.cost(key), sql: sql,
					locks: locks(taskgraph.AccessExclusive, key)}, b)
				p.onTable(key, b, a)
				return []int{b, a}
			}
			return
		}
		it.build = func(p *planner) []int {
			l := locks(taskgraph.AccessExclusive, key)
			if !p.loaded(key) {
				l = append(l, taskgraph.Lock{Key: taskgraph.DDLMutex, Mode: taskgraph.AccessExclusive})
			}
			a := p.add(it, spec{kind: taskgraph.Constraint, role: roleConstraint, cost: p.cost(key), sql: sql, locks: l})
			p.onTable(key, a)
			return []int{a}
		}
	case "FK CONSTRAINT":
		fk, ok := parseForeignKey(stmts[0])
		if !ok || len(stmts) != 1 || !p.loaded(fk.table) || !p.loaded(fk.refTable) {
			return
		}
		fk.table, fk.refTable = p.canon(fk.table), p.canon(fk.refTable)
		it.tables, it.rest = []string{fk.table, fk.refTable}, false
		it.build = func(p *planner) []int {
			var before []int
			before = append(append(before, p.byTable[fk.table]...), p.byTable[fk.refTable]...)
			addSQL := fk.addNotValid()
			checked := p.small(fk.table) && p.small(fk.refTable) && !p.done(entryStep(roleForeignKey, e.ID))
			if fk.notValid || checked {
				addSQL = sql[0]
			}
			// Both tables hold data, so neither is partitioned: ADD
			// FOREIGN KEY locks these two (and the key's index) and no
			// other table, and the declared locks keep conflicting
			// tasks apart. No DDLMutex, which made 3,333 foreign keys
			// between 10,000 small tables run one at a time.
			a := p.add(it, spec{kind: taskgraph.ForeignKey, role: roleForeignKey, cost: p.cost(fk.table), sql: []string{addSQL},
				locks: locks(taskgraph.ShareRowExclusive, fk.table, fk.refTable)}, before...)
			if fk.notValid || checked {
				return []int{a}
			}
			v := p.add(it, spec{kind: taskgraph.ForeignKey, role: roleValidate, cost: p.cost(fk.table, fk.refTable), sql: []string{fk.validate()},
				locks: []taskgraph.Lock{{Key: fk.table, Mode: taskgraph.ShareUpdateExclusive}, {Key: fk.refTable, Mode: taskgraph.RowShare}}}, a)
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
				if i, ok := p.byID.find(d); ok {
					if k := p.byID.table[i]; k != "" && !seen[k] {
						seen[k] = true
						it.tables = append(it.tables, k)
					}
				}
			}
			l := append(locks(taskgraph.AccessExclusive, it.tables...), taskgraph.Lock{Key: taskgraph.DDLMutex, Mode: taskgraph.AccessExclusive})
			return []int{p.add(it, spec{kind: taskgraph.Index, role: roleAttach, sql: sql[:1], locks: l})}
		}
	}
}
