package schedule

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// Fused is a task merged into a small table's load as the post-data plan
// is made (PostDataOptions.FuseBytes): the executor runs its statements after
// the load, in the load's transaction, and records its journal step there
// too. With 100,000 tables four of them per table were most of a
// restore's memory, so a Fused keeps only what its name, journal step and
// statements are made of, and makes them when the load runs.
type Fused struct {
	Kind taskgraph.Group
	role role
	id   int32 // the dump ID of the entry it comes from (not for ANALYZE)
	// tag is the entry's tag (pg_dump's name of the object), or for
	// ANALYZE the table's lock key.
	tag string
	// settings are the entry's session settings, shared by every entry
	// read under them; sql its statements (none for ANALYZE).
	settings *[]string
	sql      []string
}

// role is what a planned task does with its entry: with the entry's dump
// ID it makes the task's journal step, the same in every run of one
// archive.
type role uint8

const (
	roleIndex role = iota + 1
	roleIndexMarkers
	roleUniqueIndex
	roleConstraint
	roleUniqueAttach // a PRIMARY KEY or UNIQUE constraint made of its index
	roleForeignKey
	roleValidate
	roleAttach
	roleAnalyze
)

// String is the role as task names and journal steps spell it.
func (r role) String() string {
	switch r {
	case roleIndex:
		return "index"
	case roleIndexMarkers:
		return "index markers"
	case roleUniqueIndex:
		return "unique index"
	case roleConstraint, roleUniqueAttach:
		return "constraint"
	case roleForeignKey:
		return "foreign key"
	case roleValidate:
		return "validate"
	case roleAttach:
		return "attach"
	case roleAnalyze:
		return "analyze"
	}
	return fmt.Sprintf("role %d", uint8(r))
}

// Name names the task in messages, e.g. "index orders_created_idx".
func (f *Fused) Name() string {
	if f.role == roleAnalyze {
		return "analyze " + dotted(f.tag)
	}
	return f.role.String() + " " + f.tag
}

// Step is the task's journal step (see Task.Step).
func (f *Fused) Step() string {
	if f.role == roleAnalyze {
		return analyzeStep(f.tag)
	}
	return entryStep(f.role, int(f.id))
}

// SQL is the statements the task runs, its session settings first.
func (f *Fused) SQL() []string {
	if f.role == roleAnalyze {
		return []string{analyzeSQL(f.tag)}
	}
	var settings []string
	if f.settings != nil {
		settings = *f.settings
	}
	return append(slices.Clip(settings), unique(f.role, f.sql)...)
}

// unique returns the statements of a task of role r planned with the
// statements sql: for the two tasks of a PRIMARY KEY or UNIQUE constraint
// (roleUniqueIndex, roleUniqueAttach), planned with pg_dump's ADD
// CONSTRAINT and what follows it, the index build and the attachment made
// of it, which take 200 bytes a table that need not be held until they
// run. The statement parsed when planned parses again; if it could not,
// pg_dump's own statement is returned, which creates the constraint in
// one step (and, run a second time, fails loudly).
func unique(r role, sql []string) []string {
	if r != roleUniqueIndex && r != roleUniqueAttach {
		return sql
	}
	stmts, err := toc.Statements(sql[0])
	if err != nil || len(stmts) != 1 {
		return sql
	}
	uc, ok := parseUniqueConstraint(stmts[0].Tokens)
	switch {
	case !ok:
		return sql
	case r == roleUniqueIndex:
		return []string{uc.createIndex()}
	}
	return append([]string{uc.attach()}, sql[1:]...)
}

// entryStep is the journal step of an entry's task: its role and the
// entry's dump ID.
func entryStep(r role, id int) string {
	return fmt.Sprintf("%s %d", r, id)
}

// analyzeStep is the journal step of the ANALYZE of the table key.
func analyzeStep(key string) string {
	schema, name, _ := strings.Cut(key, "\x00")
	return fmt.Sprintf("analyze %q %q", schema, name)
}

// analyzeSQL is the ANALYZE of the table key.
func analyzeSQL(key string) string {
	schema, name, _ := strings.Cut(key, "\x00")
	return "ANALYZE " + pg.Qualified(schema, name)
}

// dotted is a lock key as a message shows it: schema.name, unquoted.
func dotted(key string) string {
	schema, name, _ := strings.Cut(key, "\x00")
	return schema + "." + name
}

// fuseInto returns the load a small table's tasks may fuse into, for the
// table key of tables: the table's only load, of cost under maxCost,
// holding the table's ACCESS EXCLUSIVE lock alone.
func fuseInto(g *Graph, tables map[string]TableFacts, key string, maxCost int64) (int, bool) {
	f, ok := tables[key]
	if !ok || len(f.Loads) != 1 {
		return 0, false
	}
	t := g.Tasks[f.Loads[0]]
	if t.Kind == taskgraph.Data && t.Table == key && t.Cost < maxCost && len(t.Locks) == 1 && t.Locks[0] == (taskgraph.Lock{Key: key, Mode: taskgraph.AccessExclusive}) {
		return f.Loads[0], true
	}
	return 0, false
}

// fusable returns the load that a planned task fuses into (fuseInto):
// an index, constraint or ANALYZE task with statements, locking that
// load's table alone, depending on nothing but the load.
func fusable(g *Graph, tables map[string]TableFacts, maxCost int64, s *spec) (int, bool) {
	switch s.kind {
	case taskgraph.Index, taskgraph.Constraint, taskgraph.Analyze:
	default:
		return 0, false
	}
	if (len(s.sql) == 0 && s.role != roleAnalyze) || len(s.locks) == 0 {
		return 0, false
	}
	key := s.locks[0].Key
	load, ok := fuseInto(g, tables, key, maxCost)
	if !ok {
		return 0, false
	}
	for _, l := range s.locks {
		if l.Key != key {
			return 0, false
		}
	}
	for _, d := range s.deps {
		if d != load {
			return 0, false
		}
	}
	return load, true
}

// remap maps every element of deps through f, in place, leaving out
// repeats (keeping each first one). Long lists (pg_restore's task waits for
// every task of the plan: 130,000 at 100,000 tables) are checked against a
// bit per task rather than a map, 8 MB at the plan's peak.
func remap(deps []int, f func(int) int) []int {
	out := deps[:0]
	var seen []uint64
	if len(deps) > 16 {
		top := 0
		for _, d := range deps {
			top = max(top, f(d))
		}
		seen = make([]uint64, top/64+1)
	}
	for _, d := range deps {
		d = f(d)
		switch {
		case seen != nil && d >= 0: // no task is negative (Validate refuses one): kept as it comes
			if seen[d/64]&(1<<(d%64)) != 0 {
				continue
			}
			seen[d/64] |= 1 << (d % 64)
		case seen == nil && slices.Contains(out, d):
			continue
		}
		out = append(out, d)
	}
	return out
}
