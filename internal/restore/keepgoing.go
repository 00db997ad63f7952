package restore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// Failure is one object a --keep-going restore could not restore, with
// the server's error and what was left out because it depends on it;
// Kept says the object was created all the same, without what the error
// names (its owner, its tablespace), and nothing was left out for it.
type Failure struct {
	Object  string   `json:"object"`
	Error   string   `json:"error"`
	Skipped []string `json:"skipped,omitempty"`
	Kept    bool     `json:"created_anyway,omitempty"`
}

// IncompleteError ends a --keep-going restore that could not restore
// everything: the Result's Failures name each object. The target keeps
// its journal, so that the same command with --resume, once the target has
// what it lacked, finishes the objects that failed and those skipped
// because of them.
type IncompleteError struct {
	Failed, Skipped, Kept int
}

func (e *IncompleteError) Error() string {
	return fmt.Sprintf("restore incomplete: %d objects failed, %d skipped because of them, %d created without their owner or tablespace: give the target what it lacks and run the same command with --resume to finish",
		e.Failed, e.Skipped, e.Kept)
}

// Journal steps of a --keep-going restore: a pre-data entry it could not
// create (missing, or skipped for one that was), one created without its
// owner or tablespace (partial), and one a later run created or fixed.
const (
	stepMissing = "keep going: missing "
	stepPartial = "keep going: partial "
	stepCreated = "keep going: created "
)

// keepGoing is what a --keep-going restore knows of what went wrong:
// the schema's entries with their dependencies (every section, for the
// dependents of a failed entry), what pre-data could not create, and the
// failures of the data stage's tasks.
type keepGoing struct {
	entries map[int]*toc.Entry
	order   []int         // every entry's ID, in the archive's order
	users   map[int][]int // the entries that depend on each

	failed  map[int]string // entries not created: the server's error
	skipped map[int]int    // entries not created, and the failed entry they depend on
	kept    map[int]string // entries created without their owner or tablespace
	retried map[int]bool   // missing or partial entries of an earlier run that this one finished

	mu    sync.Mutex
	tasks []Failure // the data stage's: tasks and post-data entries
}

// loadTOC reads every entry of the selection with its dependencies.
func (k *keepGoing) loadTOC(ctx context.Context, s *schemaArchive, sel *selection) error {
	if k.entries != nil {
		return nil
	}
	ids, err := listIDs(s.pgRestoreCmd(ctx, "--list", s.statisticsFlag(), s.file))
	if err != nil {
		return fmt.Errorf("pg_restore --list: %w", pg.ToolFailure(err))
	}
	args := append([]string{"--verbose", "--file=-", s.statisticsFlag()}, s.ownershipFlags()...)
	if sel.ids != nil {
		ids = keepIDs(ids, sel.ids)
		args = append(args, sel.useList())
	}
	script, err := s.pgRestoreCmd(ctx, append(args, s.file)...).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --file: %w", pg.ToolFailure(err))
	}
	parsed, err := toc.ParseWhole(string(script), ids)
	if err != nil {
		return err
	}
	k.order = ids
	k.entries = make(map[int]*toc.Entry, len(parsed.Entries))
	k.users = map[int][]int{}
	for i := range parsed.Entries {
		e := &parsed.Entries[i]
		k.entries[e.ID] = e
		for _, d := range e.Deps {
			k.users[d] = append(k.users[d], e.ID)
		}
	}
	k.failed, k.skipped, k.kept, k.retried = map[int]string{}, map[int]int{}, map[int]string{}, map[int]bool{}
	return nil
}

// entryError is one error pg_restore reported for an entry.
type entryError struct {
	msg     string
	command string // the statement that failed ("Command was:"), if said
}

// partial reports whether the error leaves the entry's object in place:
// pg_restore could not set its tablespace (it is created in the default
// one) or its owner (it is created, owned by the restoring user).
func (e entryError) partial() bool {
	return strings.HasPrefix(e.msg, "could not set ") || strings.Contains(e.command, " OWNER TO ")
}

// readErrors reads pg_restore --verbose's standard error into each
// entry's errors (keyed by dump ID; -1 for errors of no entry).
func readErrors(stderr []byte) map[int][]entryError {
	out := map[int][]entryError{}
	cur := -1
	var last *entryError
	inCommand := false
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "pg_restore: from TOC entry "):
			id, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(l, ";", 2)[0], "pg_restore: from TOC entry "))
			cur, last, inCommand = id, nil, false
		case strings.HasPrefix(l, "pg_restore: error: "):
			msg := strings.TrimPrefix(l, "pg_restore: error: ")
			msg = strings.TrimPrefix(msg, "could not execute query: ")
			msg = strings.TrimPrefix(msg, "ERROR:  ")
			out[cur] = append(out[cur], entryError{msg: msg})
			last, inCommand = &out[cur][len(out[cur])-1], false
		case strings.HasPrefix(l, "pg_restore: "):
			if !strings.HasPrefix(l, "pg_restore: warning: ") {
				cur = -1
			}
			last, inCommand = nil, false
		case last == nil:
		case strings.HasPrefix(l, "Command was: "):
			last.command, inCommand = strings.TrimPrefix(l, "Command was: "), true
		case inCommand:
			last.command += "\n" + l
		case strings.HasPrefix(l, "DETAIL:  "), strings.HasPrefix(l, "HINT:  "):
			last.msg += " (" + strings.TrimSpace(l[strings.Index(l, ":")+1:]) + ")"
		}
	}
	return out
}

// runPreData runs pg_restore for pre-data without stopping at errors (and
// one entry per transaction: an error must not take others with it), and
// sorts the entries it reports into failed and kept. args select the
// entries (the section and the selection's list, or a list of its own).
func (k *keepGoing) runPreData(ctx context.Context, s *schemaArchive, cfg *pgx.ConnConfig, args ...string) error {
	dsn, env := pg.ChildConn(cfg)
	all := []string{"--verbose", "--no-password", "--dbname=" + dsn, s.statisticsFlag()}
	all = append(all, s.ownershipFlags()...)
	for _, a := range args {
		if a != "" {
			all = append(all, a)
		}
	}
	cmd := s.pgRestoreCmd(ctx, append(all, s.file)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	errs := readErrors(stderr.Bytes())
	if orphan := errs[-1]; len(orphan) > 0 {
		return fmt.Errorf("pg_restore: %s", orphan[0].msg)
	}
	if runErr != nil && len(errs) == 0 {
		return fmt.Errorf("pg_restore: %s", pg.ToolError(stderr.Bytes(), runErr))
	}
	for id, es := range errs {
		if _, ok := k.entries[id]; !ok {
			return fmt.Errorf("pg_restore reported an error for entry %d, which is not in the table of contents: %s", id, es[0].msg)
		}
		var msgs []string
		partial := true
		for _, e := range es {
			msgs = append(msgs, e.msg)
			partial = partial && e.partial()
		}
		if partial {
			k.kept[id] = strings.Join(msgs, "; ")
		} else {
			k.failed[id] = es[0].msg
		}
	}
	return nil
}

// classify sorts the failed entries into those that failed of themselves
// and those that failed (or would) because something they depend on did:
// every entry depending, directly or not, on a failed one is skipped
// under the first such failure in the archive's order.
func (k *keepGoing) classify() {
	for _, id := range k.order {
		if _, ok := k.failed[id]; !ok {
			continue
		}
		if _, ok := k.skipped[id]; ok {
			continue
		}
		stack := slices.Clone(k.users[id])
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if _, ok := k.skipped[u]; ok || u == id {
				continue
			}
			k.skipped[u] = id
			delete(k.kept, u)
			stack = append(stack, k.users[u]...)
		}
	}
	for id := range k.skipped {
		delete(k.failed, id)
	}
}

// missing reports whether entry id is not in the target.
func (k *keepGoing) missing(id int) bool {
	if _, ok := k.failed[id]; ok {
		return true
	}
	_, ok := k.skipped[id]
	return ok
}

// incomplete reports whether anything failed.
func (k *keepGoing) incomplete() bool {
	return k != nil && (len(k.failed) > 0 || len(k.kept) > 0 || len(k.tasks) > 0)
}

// preDataSteps are the journal rows that record the state pre-data left:
// every pre-data entry not created, and every one created without its
// owner or tablespace; and those an earlier run left that this one
// finished.
func (k *keepGoing) preDataSteps() []string {
	var steps []string
	for _, id := range k.order {
		e := k.entries[id]
		switch {
		case k.retried[id]:
			steps = append(steps, stepCreated+strconv.Itoa(id))
		case k.missing(id) && isPreData(e):
			steps = append(steps, stepMissing+strconv.Itoa(id))
		case k.kept[id] != "":
			steps = append(steps, stepPartial+strconv.Itoa(id))
		}
	}
	return steps
}

// isPreData reports whether e is created in pre-data: the entries the
// data stage plans (indexes, constraints, triggers and the rest of
// post-data) are not.
func isPreData(e *toc.Entry) bool {
	switch e.Type {
	case "INDEX", "CONSTRAINT", "FK CONSTRAINT", "INDEX ATTACH", "TRIGGER", "RULE", "POLICY", "EVENT TRIGGER",
		"PUBLICATION", "PUBLICATION TABLE", "PUBLICATION TABLES IN SCHEMA", "SUBSCRIPTION", "SUBSCRIPTION TABLE",
		"STATISTICS", "MATERIALIZED VIEW DATA", "STATISTICS DATA", "DEFAULT ACL":
		return false
	}
	return true
}

// left are the entries of an earlier run's journal j still to be done:
// those it could not create (missing) and those it created without their
// owner or tablespace (partial), but for those a later run finished.
func left(j *journal.Journal, prefix string) []int {
	var ids []int
	for _, s := range j.Steps(prefix) {
		id, err := strconv.Atoi(strings.TrimPrefix(s, prefix))
		if err == nil && !j.IsDone(stepCreated+strconv.Itoa(id)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// resumePreData finishes, on resume, what an earlier --keep-going run's
// pre-data left: it creates the entries it could not (in the archive's
// order, as pg_restore would), and gives those it created without their
// owner or tablespace what they lacked.
func (k *keepGoing) resumePreData(ctx context.Context, s *schemaArchive, cfg *pgx.ConnConfig, j *journal.Journal) error {
	missing := left(j, stepMissing)
	if len(missing) > 0 {
		want := map[int]bool{}
		for _, id := range missing {
			want[id] = true
		}
		list, err := writeList(keepIDs(k.order, want))
		if err != nil {
			return err
		}
		defer removeList(list)
		if err := k.runPreData(ctx, s, cfg, "--use-list="+list); err != nil {
			return err
		}
		for _, id := range missing {
			if _, bad := k.failed[id]; !bad && k.kept[id] == "" {
				k.retried[id] = true
			}
		}
	}
	partial := left(j, stepPartial)
	if len(partial) == 0 {
		return nil
	}
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, id := range partial {
		e := k.entries[id]
		if e == nil {
			continue
		}
		fix := fixes(e)
		if _, err := conn.Exec(ctx, strings.Join(fix, ";\n")); err != nil {
			k.kept[id] = pgMessage(err)
			continue
		}
		k.retried[id] = true
	}
	return nil
}

// fixes are the statements that give an object pg_restore created without
// its owner or tablespace what it lacked: the entry's own ALTER ... OWNER
// TO, and a move into the tablespace it was to be created in.
func fixes(e *toc.Entry) []string {
	var out []string
	if stmts, err := toc.Statements(e.SQL); err == nil {
		for _, st := range stmts {
			if sql := strings.TrimSpace(st.Text); strings.Contains(sql, " OWNER TO ") && strings.HasPrefix(sql, "ALTER ") {
				out = append(out, strings.TrimSuffix(sql, ";"))
			}
		}
	}
	for _, set := range e.Settings {
		ts, ok := strings.CutPrefix(set, "SET default_tablespace = ")
		ts = strings.TrimSuffix(ts, ";")
		if !ok || ts == "''" || ts == "" {
			continue
		}
		switch e.Type {
		case "TABLE", "INDEX", "MATERIALIZED VIEW":
			out = append(out, fmt.Sprintf("ALTER %s %s SET TABLESPACE %s", e.Type, pg.Qualified(e.Schema, e.Name), ts))
		}
	}
	if len(out) == 0 {
		out = append(out, "SELECT 1")
	}
	return out
}

// pgMessage is a server error's message and detail, on one line.
func pgMessage(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// narrow leaves out of sel what depends on an entry pre-data could not
// create: the tables' data, sequences' values, materialized views'
// refreshes, and the post-data entries (through a new list file), so
// that the data stage plans none of them; skip tells the source which
// streams will not be read.
func (k *keepGoing) narrow(sel *selection, skip func(...uint32)) error {
	if len(k.failed) == 0 && len(k.skipped) == 0 {
		return nil
	}
	gone := map[[2]string]bool{}
	for _, id := range k.order {
		if e := k.entries[id]; k.missing(id) && e.Class == relationClass {
			gone[[2]string{e.Schema, e.Name}] = true
		}
	}
	m := *sel.m
	m.Tables, m.Chunks, m.Sequences, m.Matviews = nil, nil, nil, nil
	index := map[int]int{}
	for i, t := range sel.m.Tables {
		if !gone[[2]string{t.Schema, t.Name}] {
			index[i] = len(m.Tables)
			m.Tables = append(m.Tables, t)
		}
	}
	var unread []uint32
	for _, c := range sel.m.Chunks {
		if j, ok := index[c.Table]; ok {
			c.Table = j
			m.Chunks = append(m.Chunks, c)
		} else {
			unread = append(unread, c.Stream)
		}
	}
	skip(unread...)
	for _, s := range sel.m.Sequences {
		if !gone[[2]string{s.Schema, s.Name}] {
			m.Sequences = append(m.Sequences, s)
		}
	}
	for _, mv := range sel.m.Matviews {
		if !gone[[2]string{mv.Schema, mv.Name}] {
			m.Matviews = append(m.Matviews, mv)
		}
	}
	sel.m = &m
	kept := map[int]bool{}
	var ids []int
	for _, id := range k.order {
		if !k.missing(id) {
			kept[id] = true
			ids = append(ids, id)
		}
	}
	list, err := writeList(ids)
	if err != nil {
		return err
	}
	sel.remove()
	sel.list, sel.ids = list, kept
	return nil
}

// addTask records a failed task of the data stage and the tasks left out
// because of it.
func (k *keepGoing) addTask(f Failure) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tasks = append(k.tasks, f)
}

// describe names an entry as the end of a run lists it: its type and
// qualified name.
func describe(e *toc.Entry) string {
	if e.Schema == "" || e.Schema == "-" {
		return e.Type + " " + e.Name
	}
	return e.Type + " " + e.Schema + "." + e.Name
}

// report lists every failure, with what was skipped because of it, and
// the counts: pre-data's in the archive's order, then the data stage's.
func (k *keepGoing) report(full *archive.Manifest) ([]Failure, *IncompleteError) {
	if !k.incomplete() {
		return nil, nil
	}
	var out []Failure
	e := &IncompleteError{}
	at := map[int]int{}
	tables := map[[2]string]bool{}
	for _, t := range full.Tables {
		tables[[2]string{t.Schema, t.Name}] = true
	}
	for _, id := range k.order {
		if msg, ok := k.failed[id]; ok {
			at[id] = len(out)
			d := k.entries[id]
			f := Failure{Object: describe(d), Error: msg}
			if d.Type == "TABLE" && tables[[2]string{d.Schema, d.Name}] {
				f.Skipped = append(f.Skipped, "TABLE DATA "+d.Schema+"."+d.Name)
				e.Skipped++
			}
			out = append(out, f)
			e.Failed++
		}
	}
	for _, id := range k.order {
		root, ok := k.skipped[id]
		if !ok {
			continue
		}
		d := k.entries[id]
		f := &out[at[root]]
		f.Skipped = append(f.Skipped, describe(d))
		e.Skipped++
		if d.Type == "TABLE" && tables[[2]string{d.Schema, d.Name}] {
			f.Skipped = append(f.Skipped, "TABLE DATA "+d.Schema+"."+d.Name)
			e.Skipped++
		}
	}
	for _, id := range k.order {
		if msg, ok := k.kept[id]; ok {
			out = append(out, Failure{Object: describe(k.entries[id]), Error: msg, Kept: true})
			e.Kept++
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range k.tasks {
		out = append(out, f)
		e.Failed++
		e.Skipped += len(f.Skipped)
	}
	return out, e
}

// keepGoingSchema is pre-data with --keep-going: one pg_restore run that
// goes on past errors (keepGoing.runPreData) into cfg, then the entries
// it could not create sorted into failures and what they held back. With
// --create, a database that could not be created stops the restore: there
// is nowhere to go on.
func (p *preData) keepGoingSchema(ctx context.Context, cfg *pgx.ConnConfig) error {
	if err := p.kg.loadTOC(ctx, p.schema, p.sel); err != nil {
		return err
	}
	args := []string{"--section=pre-data", p.sel.useList()}
	if p.opts.Create {
		args = append(args, "--create", cleanFlag(p.opts.Clean))
	}
	if err := p.kg.runPreData(ctx, p.schema, cfg, args...); err != nil {
		return err
	}
	for id, msg := range p.kg.failed {
		if e := p.kg.entries[id]; e.Type == "DATABASE" {
			return fmt.Errorf("pg_restore: create database: %s", msg)
		}
	}
	p.kg.classify()
	return nil
}
