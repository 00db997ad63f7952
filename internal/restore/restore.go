// Package restore loads a pgsprint archive into a database: pre-data with
// pg_restore, sequences, then table data, large objects, indexes,
// constraints, foreign keys and ANALYZE as one dependency graph on N
// connections (internal/schedule), the rest of post-data with pg_restore,
// and materialized view refreshes.
package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// Options configure one restore.
type Options struct {
	Target *pgx.ConnConfig
	// File is the archive to read; "-" reads it from Stdin as it arrives
	// (archive.Demux), loading on Jobs connections all the same.
	File  string
	Stdin io.Reader // File "-"'s input; nil is os.Stdin
	// SpillDir holds, for File "-", the data of streams that arrive before a
	// connection is free to load them (os.TempDir() when empty).
	SpillDir string
	// Source, when set, is read instead of File: clone hands in a live
	// source whose streams are COPYs from the source database.
	Source  archive.Source
	Jobs    int
	Create  bool // create the archived database, connecting to Target's database to do so (as pg_restore --create)
	Clean   bool // drop the archive's objects in the target first
	NoOwner bool // do not restore ownership (as pg_restore --no-owner)
	NoACL   bool // do not restore privileges (as pg_restore --no-privileges)
	// MaintenanceWorkMem is each connection's maintenance_work_mem (e.g.
	// "512MB"); index builds sort in it. Empty keeps the server's.
	MaintenanceWorkMem string
	NoAnalyze          bool // skip ANALYZE of the restored tables
	// NoStatistics leaves the archive's optimizer statistics (pg_dump 18+)
	// out: the restored tables are analyzed instead.
	NoStatistics bool
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
	// SplitMinBytes is the smallest chunk loaded on several connections at
	// once (0: 256 MiB; negative: never), for measuring the trade-off
	// against COPY FREEZE on one connection.
	SplitMinBytes int64
	Logger        *slog.Logger
	// Progress hears about the work as it happens; nil reports nowhere.
	Progress progress.Reporter
}

// Result summarises a finished restore.
type Result struct {
	Database     string
	Tables       int
	Chunks       int // table data chunks, as the dump counted them (large objects apart)
	Rows         int64
	LargeObjects int
	Sequences    int
	Resumed      int // steps an earlier, interrupted run had finished
	Elapsed      time.Duration
	Phases       []Phase
	Slowest      []Item // the longest tasks, longest first
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

// Item is one task of the restore and how long it took.
type Item struct {
	Name    string
	Elapsed time.Duration
}

// Run restores opts.File into the target.
func Run(ctx context.Context, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Jobs < 1 {
		opts.Jobs = 1
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	src, err := openSource(opts)
	if err != nil {
		return nil, err
	}
	defer src.close()
	ar := src.Source
	m := ar.Manifest()

	schemaFile, err := archive.ExtractSchema(ar)
	if err != nil {
		return nil, err
	}
	defer os.Remove(schemaFile)

	r := &run{opts: opts, ar: newCountingSource(ar, opts.Progress), finish: src.finish, skip: src.skip, m: m, schema: schemaFile,
		log: log, begin: start, res: &Result{}}
	defer r.sel.remove()
	if err := r.run(ctx); err != nil {
		return nil, r.explain(err)
	}
	r.res.Elapsed = time.Since(start)
	return r.res, nil
}

// run is the state of one restore.
type run struct {
	opts    Options
	ar      archive.Source
	finish  func() error      // the source's end check (openedSource.finish)
	skip    func(...uint32)   // drops streams the restore will not read (openedSource.skip)
	sel     selection         // the part of the archive restored
	offline bool              // no target: choosing the parts for a script (Select)
	m       *archive.Manifest // narrowed to the selection by chooseParts
	schema  string            // pg_dump custom archive extracted to a temp file
	tools   pgbin.Tools
	target  *pgx.ConnConfig
	log     *slog.Logger
	res     *Result
	begin   time.Time
	j       *journal // the target's journal of finished steps
	stats   statistics

	targetMajor int // the target server's major version

	targetEncoding string // the target's server_encoding, once connected
}

func (r *run) phase(name string, fn func() error) error {
	r.opts.Progress.Phase(name)
	t := time.Now()
	err := fn()
	r.res.Phases = append(r.res.Phases, Phase{Name: name, Start: t.Sub(r.begin), Elapsed: time.Since(t)})
	r.log.Info("phase done", "phase", name, "elapsed", time.Since(t).Round(time.Millisecond))
	return err
}

func (r *run) run(ctx context.Context) error {
	var err error
	if r.tools, err = r.chooseTools(ctx); err != nil {
		return err
	}
	if err := r.chooseParts(ctx, r.skip); err != nil {
		return err
	}
	if err := r.chooseStatistics(ctx, r.targetMajor); err != nil {
		return err
	}
	r.res.Tables, r.res.LargeObjects, r.res.Sequences = len(r.m.Tables), len(r.m.LargeObjects), len(r.m.Sequences)
	r.res.Chunks = len(r.m.Chunks)
	if err := r.phase("pre-data", func() error { return r.preData(ctx) }); err != nil {
		return err
	}
	r.res.Database = r.target.Database
	r.skipDone()
	if r.sel.dataOnly && !r.opts.DisableTriggers {
		if err := r.readForeignKeys(ctx); err != nil {
			return err
		}
	}
	if err := r.phase("sequences", func() error { return r.setSequences(ctx) }); err != nil {
		return err
	}
	var script *toc.Script
	if !r.sel.dataOnly {
		if script, err = r.postDataScript(ctx); err != nil {
			// Without a parsed table of contents, pg_restore does all of
			// post-data after the data is in.
			r.log.Warn("post-data left to pg_restore", "reason", err)
			script = nil
		}
	}
	g, err := r.buildGraph(script)
	if err != nil {
		return err
	}
	if err := r.resetPartialTables(ctx); err != nil {
		return err
	}
	// The parsed script is not kept for the run (only its preamble is,
	// in runGraph): with 100,000 tables it is tens of MB.
	fallback := script == nil
	if err := r.runGraph(ctx, g, script); err != nil {
		return err
	}
	if err := r.finishSource(); err != nil {
		return err
	}
	if fallback && !r.sel.dataOnly {
		if err := r.phase("post-data", func() error { return r.postData(ctx) }); err != nil {
			return err
		}
	}
	if err := r.phase("refresh", func() error { return r.refreshMatviews(ctx) }); err != nil {
		return err
	}
	if len(r.stats.ids) > 0 {
		if err := r.phase("statistics", func() error { return r.restoreStatistics(ctx) }); err != nil {
			return err
		}
	}
	// Everything is in: the journal goes, and with it the one object the
	// source does not have.
	return dropJournal(ctx, r.target)
}

// preData prepares the target, opens the journal and creates the schema's
// pre-data objects, unless an earlier run of a resumed restore finished
// them.
func (r *run) preData(ctx context.Context) error {
	r.target = r.opts.Target
	id := ArchiveID(r.m)
	if r.opts.Create {
		return r.preDataCreate(ctx, id)
	}
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := r.checkEncoding(ctx, conn); err != nil {
		return err
	}
	found, err := readJournal(ctx, conn)
	if err != nil {
		return err
	}
	if err := r.checkJournal(found, id); err != nil {
		return err
	}
	if found != nil && r.opts.Resume {
		if found, err = r.rereadJournal(ctx, conn); err != nil {
			return err
		}
		r.j = found
		r.res.Resumed = found.finished()
		if found.isDone(stepPreData) {
			r.log.Info("resuming", "archive", id, "steps done", r.res.Resumed)
			return nil
		}
		// Pre-data (pg_restore, one transaction per object) was cut short.
		// The journal was created right after the target was found to
		// hold none of the objects this restore creates (or --clean
		// dropped them), so whatever of them it holds now, this restore
		// created: drop them and start pre-data again. A journal that
		// cannot vouch for that check drops nothing.
		if !found.isDone(stepChecked) {
			return fmt.Errorf("target database %q holds an unfinished restore whose pre-data was interrupted, and its journal does not record that the target held none of the archive's objects when it began (an older pgsprint checked only tables): --resume will not drop objects that may be yours; use --clean to replace them, or restore into an empty database", r.target.Database)
		}
		r.log.Info("resuming: pre-data was interrupted, dropping what it created")
		if err := r.dropArchivedObjects(ctx); err != nil {
			return err
		}
	} else {
		if found != nil { // --clean without --resume: start over
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+pg.Ident(JournalSchema)+" CASCADE"); err != nil {
				return fmt.Errorf("drop restore journal: %w", err)
			}
		}
		switch {
		case r.sel.dataOnly:
			if err := r.checkDataTargets(ctx, conn); err != nil {
				return err
			}
		case r.opts.Clean:
			if err := r.dropArchivedObjects(ctx); err != nil {
				return err
			}
		case r.sel.list != "":
			if err := r.sel.refuseExisting(ctx, r.target); err != nil {
				return err
			}
		default:
			if err := refuseNonEmpty(ctx, conn, r.target); err != nil {
				return err
			}
		}
		if r.j, err = createJournal(ctx, conn, id, r.m, stepChecked); err != nil {
			return err
		}
	}
	if r.sel.dataOnly {
		return r.j.record(ctx, conn, stepPreData)
	}
	if err := r.pgRestore(ctx, r.target, "--section=pre-data", r.sel.useList()); err != nil {
		return err
	}
	return r.j.record(ctx, conn, stepPreData)
}

// preDataCreate is pre-data with --create: pg_restore creates the archived
// database, and the journal is created in it once pre-data is done, so a
// journal there always means pre-data finished. A database interrupted
// before that holds no journal and is refused on resume.
func (r *run) preDataCreate(ctx context.Context, id string) error {
	created := r.opts.Target.Copy()
	created.Database = r.m.Database
	if !r.opts.Clean || r.opts.Resume {
		conn, err := pg.Connect(ctx, created)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "3D000": // no such database: a fresh restore
		case err != nil:
			return err
		default:
			defer conn.Close(context.WithoutCancel(ctx))
			r.target = created
			found, err := readJournal(ctx, conn)
			if err != nil {
				return err
			}
			if err := r.checkJournal(found, id); err != nil {
				return err
			}
			if r.opts.Resume {
				if found == nil {
					return fmt.Errorf("database %q exists but holds no pgsprint journal: it was not created by an interrupted restore of this archive, or that restore stopped before pre-data finished; use --clean --create without --resume to start over", created.Database)
				}
				if found, err = r.rereadJournal(ctx, conn); err != nil {
					return err
				}
				r.j = found
				r.res.Resumed = found.finished()
				return nil
			}
			r.target = r.opts.Target
		}
	}
	if err := r.pgRestore(ctx, r.opts.Target, "--section=pre-data", "--create", cleanFlag(r.opts.Clean), r.sel.useList()); err != nil {
		return err
	}
	r.target = created
	conn, err := pg.Connect(ctx, created)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	r.j, err = createJournal(ctx, conn, id, r.m, stepPreData)
	return err
}

// rereadJournal waits for the sessions of the interrupted run to end
// (waitForOrphans), then reads the journal again: a killed pgsprint's
// backend goes on with the query it was sent, and a task's query is its
// whole transaction, journal row and COMMIT included (engine.inTx), so
// steps may have been committed since the journal was first read.
func (r *run) rereadJournal(ctx context.Context, conn *pgx.Conn) (*journal, error) {
	if err := waitForOrphans(ctx, conn, r.log); err != nil {
		return nil, err
	}
	found, err := readJournal(ctx, conn)
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("the restore journal in target database %q went away while waiting for the interrupted run's sessions to end: is another pgsprint at work there?", r.target.Database)
	}
	return found, r.checkJournal(found, ArchiveID(r.m))
}

func cleanFlag(clean bool) string {
	if clean {
		return "--clean"
	}
	return ""
}

func majorOf(version string) int {
	var major int
	fmt.Sscanf(version, "%d", &major)
	return major
}

// refuseNonEmpty stops a restore into a database that already holds
// anything someone created (pg.UserObjects: tables, sequences, types,
// functions, schemas but public, extensions but plpgsql, large objects...),
// before anything is created: loading on top of existing rows would
// duplicate or mix data, pg_restore would fail half-way on an object that
// already exists, and a resume must be able to tell that every archived
// object in the target is its own.
func refuseNonEmpty(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig) error {
	n, found, err := pg.UserObjects(ctx, conn, 5)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	list := strings.Join(found, ", ")
	if n > len(found) {
		list += fmt.Sprintf(" and %d more", n-len(found))
	}
	return fmt.Errorf("target database %q is not empty: it holds %s; restore into an empty database or use --clean", cfg.Database, list)
}
