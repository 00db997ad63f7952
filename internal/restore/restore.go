// Package restore loads a pgsprint archive into a database: pre-data with
// pg_restore, sequences, then table data, large objects, indexes,
// constraints, foreign keys and ANALYZE as one dependency graph on N
// connections (internal/schedule), the rest of post-data with pg_restore,
// and materialized view refreshes.
//
// A restore is a sequence of stages, each a type built from what the one
// before produced: choose (chooser: the selection of the archive's parts),
// pre-data (preData: the target prepared, its journal open), data
// (dataStage: the task graph of loads, with post-data's tasks), post-data
// (postData: what pg_restore does after the loads when post-data cannot be
// taken apart) and finish (finishStage: refreshes, statistics, the
// journal's end). Select gives restore --to-sql the choose stage alone.
package restore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// Options configure one restore.
type Options struct {
	Target *pgx.ConnConfig
	// Where names the archive the restore reads in the messages about its
	// bytes ("archive on X is damaged"): its location, as
	// archive.Opened's String says it. Empty for a source that is no
	// archive of its own (clone's live source, a database's view of a
	// whole-server archive).
	Where string
	// From names what the restore reads in messages about its content
	// ("no matching tables were found in ..."): "the archive" when
	// empty; a clone names its source database.
	From string
	// SaveManifest keeps the manifest with the journal in the target: a
	// resumed clone, whose source has no archive to read it from again,
	// plans nothing without it (journal.ReadManifest).
	SaveManifest bool
	Jobs         int
	Create       bool // create the archived database, connecting to Target's database to do so (as pg_restore --create)
	Clean        bool // drop the archive's objects in the target first
	Settings          // how the target is written: ownership, privileges, maintenance_work_mem, ANALYZE, statistics
	// Filter restores part of the archive, with pg_dump's pattern
	// semantics: -n/-N/-t/-T (a table comes with its indexes,
	// constraints, triggers and owned sequences), --schema-only,
	// --data-only (load into existing, empty tables; create nothing).
	Filter filter.Options
	// UseList is a list file in restore -l's format (pg_restore --list's,
	// with pgsprint's data entries): only the entries it keeps are
	// restored, as with pg_restore -L (see chooseFromList).
	UseList string
	// DisableTriggers loads --data-only rows with triggers and foreign key
	// checks off (session_replication_role = replica, which needs a
	// superuser), as pg_restore --disable-triggers.
	DisableTriggers bool
	// Resume finishes a restore that was interrupted, using the journal it
	// left in the target: finished steps are skipped, unfinished ones
	// redone. Without an earlier run's journal it is an ordinary restore.
	Resume bool
	// KeepGoing goes on past an object that fails, as pg_restore does
	// without --exit-on-error: what depends on it is skipped, the rest is
	// restored exactly, and the run ends with an IncompleteError naming
	// every failure (Result.Failures) and a journal that --resume, once
	// the target has what it lacked, finishes from. Without it the restore
	// stops at the first error. A resume of such a run goes on likewise.
	KeepGoing bool
	// SplitMinBytes is the smallest chunk loaded on several connections at
	// once (0: 256 MiB; negative: never), for measuring the trade-off
	// against COPY FREEZE on one connection.
	SplitMinBytes int64
	// PreDataSplitMin is the fewest independent schema entries (tables,
	// sequences... of one level of pre-data's dependency order) that
	// pre-data splits over several pg_restore runs at once, on up to Jobs
	// connections (0: 200; negative: never, one run as pg_restore -j
	// does): thousands of tables are created in a fraction of the time,
	// and a small schema keeps its single run.
	PreDataSplitMin int
	Logger          *slog.Logger
	// Progress hears about the work as it happens; nil reports nowhere.
	Progress progress.Reporter
	// Programs finds pg_restore and psql, looking once for a caller that
	// restores many databases; nil looks each time.
	Programs *pgbin.Finder
}

// Settings say how a restore writes into its target, whatever it reads:
// the flags restore and clone share, said once by the command and handed
// whole to every restore it runs (each database of --all included).
type Settings struct {
	NoOwner bool // do not restore ownership (as pg_restore --no-owner)
	NoACL   bool // do not restore privileges (as pg_restore --no-privileges)
	// MaintenanceWorkMem is each connection's maintenance_work_mem (e.g.
	// "512MB"); index builds sort in it. Empty keeps the server's.
	MaintenanceWorkMem string
	NoAnalyze          bool // skip ANALYZE of the restored tables
	// NoStatistics leaves the archive's optimizer statistics (pg_dump 18+)
	// out: the restored tables are analyzed instead.
	NoStatistics bool
	// TransactionSize is how many schema entries each pg_restore run of
	// pre-data creates per transaction (pg_restore 17's
	// --transaction-size; 0: preDataTransactionSize). The rows, the
	// indexes and constraints pgsprint builds itself, and the rest of
	// post-data commit as they always do: each step with its journal row.
	TransactionSize int
	// SessionAuthorization sets ownership with SET SESSION AUTHORIZATION
	// instead of ALTER OWNER (pg_restore --use-set-session-authorization).
	SessionAuthorization bool
}

// checkTools refuses, before any work, what the pg_restore the restore
// runs (tools) cannot do of opts.
func checkTools(tools pgbin.Tools, opts Options) error {
	if opts.TransactionSize > 0 && tools.Major < 17 {
		return fmt.Errorf("--transaction-size needs pg_restore 17 or later, and this restore runs pg_restore %d", tools.Major)
	}
	return opts.Filter.CheckPgRestore(tools.Major)
}

// Result summarises a finished restore.
type Result struct {
	Database     string
	Tables       int
	Chunks       int // table data chunks, as the dump counted them (large objects apart)
	Rows         int64
	CopyFormat   string // the COPY format of the data read (archive.Manifest.CopyFormat)
	LargeObjects int
	Sequences    int
	Resumed      int // steps an earlier, interrupted run had finished
	Elapsed      time.Duration
	Phases       []Phase
	Slowest      []SlowTask // the longest tasks, longest first
	// Failures are what a --keep-going restore could not restore (Run then
	// returns an IncompleteError too).
	Failures []Failure
}

// Phase is one step of the restore. Steps run by the scheduler overlap
// (indexes of one table build while another loads), so Start and Elapsed
// give the span from the step's first task to its last, and Busy the time
// its tasks took summed over connections.
type Phase struct {
	Name    string
	Start   time.Duration // since the restore began
	Elapsed time.Duration
	Busy    time.Duration // zero for steps outside the scheduler
	Items   int           // tasks run, zero for steps outside the scheduler
}

// SlowTask is one task of the restore and how long it took (Result.Slowest).
type SlowTask struct {
	Name    string
	Elapsed time.Duration
}

// Run restores source into the target, stage by stage. The caller opens it
// (archive.OpenLocation: a file, a pipe read as it arrives, an object) or
// hands in a live one (clone), and closes it.
func Run(ctx context.Context, source archive.Source, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	log := logger(opts.Logger)
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	src := openSource(source, opts.Where)
	ar := src.Source
	m := ar.Manifest()
	if m.IsCluster() {
		return nil, fmt.Errorf("the archive holds a whole server (dump --all): restore it with --all, or one of its databases with --database NAME")
	}

	// Failures are explained with the target's encoding once pre-data has
	// read it.
	var pre *preData
	fail := func(err error) (*Result, error) {
		enc := ""
		if pre != nil {
			enc = pre.encoding
		}
		err = explain(src.damaged(err), m.Encoding, enc, opts)
		switch {
		case pre == nil:
		case errors.Is(err, archive.ErrIncomplete):
			// The journal in the target knows what was done: the next
			// run is told to finish it (checkJournal says the same).
			err = fmt.Errorf("%w; the target is partly restored: restore the whole archive with --resume to finish it, or with --clean to start over", err)
		case errors.Is(err, archive.ErrCorrupt):
			// A file or object damaged where a table's rows are: what
			// loaded before it stays, and its journal with it.
			err = fmt.Errorf("%w; the target is partly restored: restore an undamaged copy of the archive with --resume to finish it, or with --clean to start over", err)
		}
		return nil, err
	}
	schemaFile, err := archive.ExtractSchema(ar)
	if err != nil {
		return fail(err)
	}
	defer schemaFile.Remove()
	tools, targetMajor, err := chooseTools(ctx, opts, m, log)
	if err != nil {
		return fail(err)
	}
	if err := checkTools(tools, opts); err != nil {
		return fail(err)
	}
	schema := newSchemaArchive(tools, schemaFile.Path, m, opts)
	sel, err := choose(ctx, opts, m, schema, opts.Target, log, src.skip)
	if err != nil {
		return fail(err)
	}
	defer sel.remove()
	stats, err := chooseStatistics(ctx, schema, sel, opts.NoStatistics, targetMajor, log)
	if err != nil {
		return fail(err)
	}

	ph := &phases{begin: start, rep: opts.Progress, log: log}
	pre = &preData{opts: opts, m: sel.m, sel: sel, schema: schema, log: log}
	if opts.KeepGoing || opts.Resume {
		pre.kg = &keepGoing{}
	}
	full := sel.m
	var t *target
	if err := ph.run("pre-data", func() (err error) { t, err = pre.run(ctx); return err }); err != nil {
		return fail(err)
	}
	kg := pre.kg
	if kg != nil && kg.entries == nil {
		kg = nil // neither --keep-going nor the resume of such a run
	}
	if kg != nil {
		opts.KeepGoing = true
		if err := kg.narrow(sel, src.skip); err != nil {
			return fail(err)
		}
	}
	post := newPostData(schema, sel, log)
	data := newDataStage(opts, newCountingSource(ar, opts.Progress), src, sel, stats, t, schema, log, ph)
	data.kg = kg
	rows, slowest, err := data.run(ctx, post)
	if err != nil {
		return fail(err)
	}
	if post.leftToPgRestore() {
		if err := ph.run("post-data", func() error { return post.rest(ctx, t) }); err != nil {
			return fail(err)
		}
	}
	failures, incomplete := kg.report(full)
	fin := &finishStage{target: t, m: sel.m, stats: stats, schema: schema, phases: ph, log: log, clean: opts.Clean, keepJournal: incomplete != nil}
	if err := fin.run(ctx); err != nil {
		return fail(err)
	}
	res := &Result{
		Database: t.cfg.Database,
		Tables:   len(sel.m.Tables), Chunks: len(sel.m.Chunks), LargeObjects: len(sel.m.LargeObjects), Sequences: len(sel.m.Sequences),
		Rows: rows, CopyFormat: sel.m.CopyFormat(), Resumed: t.resumed, Elapsed: time.Since(start), Phases: ph.list, Slowest: slowest,
		Failures: failures,
	}
	if incomplete != nil {
		return res, incomplete
	}
	return res, nil
}

// phases times the steps of one restore for its Result and tells the
// progress reporter which one is running.
type phases struct {
	begin time.Time // when the restore began
	rep   progress.Reporter
	log   *slog.Logger
	list  []Phase
}

// run runs fn as the phase name.
func (p *phases) run(name string, fn func() error) error {
	p.rep.Phase(name)
	t := time.Now()
	err := fn()
	p.list = append(p.list, Phase{Name: name, Start: t.Sub(p.begin), Elapsed: time.Since(t)})
	p.log.Info("phase done", "phase", name, "elapsed", time.Since(t).Round(time.Millisecond))
	return err
}

func majorOf(version string) int {
	var major int
	fmt.Sscanf(version, "%d", &major)
	return major
}
