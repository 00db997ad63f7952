package cluster

import (
	"context"
	"fmt"
	"github.com/pgsprint/pgsprint/internal/journal"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// RestoreOptions configure the restore of a whole-server archive: what
// restore.Options says of one database, said once for every database,
// with the archive and the database to restore.
type RestoreOptions struct {
	// Options apply to every database, as restore applies them to one,
	// with these meanings for the whole server: Target is the database to
	// connect to first (-d, e.g. postgres): the globals are restored
	// through it, and the databases created from it; Where names the
	// archive; Jobs are the connections of the big databases restored at
	// once (the small ones take as many more: schedule); Create, with
	// Database only, creates it under its own name; Clean replaces the
	// archive's databases that exist (drop them first); Settings and
	// Filter.Objects apply to every database (and NoTablespaces, NoOwner,
	// NoACL to the globals); Resume finishes an interrupted whole-server
	// restore: the globals and the databases it finished are skipped, the
	// others resumed from their own journal; Progress hears about every
	// database's work, as one stream (progress.Parts); Programs, when nil,
	// is one Finder for every database. Every other field (the split
	// thresholds, ...) reaches each database's restore as it is
	// (databaseOptions).
	restore.Options
	// Source is a whole-server archive: a Reader, or a Demux reading a
	// pipe, whose databases then restore as their streams arrive.
	Source archive.Source
	// Database restores only this database of the archive, without the
	// globals: into Target's database, or created under its own name
	// with Create.
	Database string
}

// RestoreResult summarises a whole-server restore.
type RestoreResult struct {
	Globals   *GlobalsReport // nil when the globals were not restored (Database, or a resume that found them done)
	Databases []DatabaseResult
	Elapsed   time.Duration
}

// DatabaseResult is the restore of one database.
type DatabaseResult struct {
	Name    string
	Skipped bool // an earlier, interrupted run had finished it
	*restore.Result
}

// Restore restores a whole-server archive: the globals, then every
// database, created as pg_restore --create creates it (the database
// postgres, which every server has, is restored into), several at once.
func Restore(ctx context.Context, opts RestoreOptions) (*RestoreResult, error) {
	start := time.Now()
	opts.Jobs = max(opts.Jobs, 1)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Programs == nil {
		opts.Programs = &pgbin.Finder{} // looked for once, not once per database
	}
	m := opts.Source.Manifest()
	if !m.IsCluster() {
		return nil, fmt.Errorf("the archive holds one database (%q), not a whole server (dump --all): restore it without --all", m.Database)
	}
	if opts.Database != "" {
		return restoreOne(ctx, opts, start)
	}
	b := &build{
		target: opts.Target, id: journal.ArchiveID(m), jobs: opts.Jobs, clean: opts.Clean, resume: opts.Resume, verb: "restore --all", of: "archive",
		dbs: m.Databases, resumable: true, noOwner: opts.NoOwner,
		globals: func() (string, error) { return readAll(opts.Source, m.Globals.Stream) },
		gopts:   GlobalsOptions{NoTablespaces: opts.Filter.Objects.NoTablespaces, Settings: opts.Settings},
		one: func(ctx context.Context, name string, jobs int, s step, rep progress.Reporter) (*restore.Result, error) {
			return restoreDatabase(ctx, opts, name, jobs, s, rep)
		},
		log: opts.Logger, progress: progress.NewParts(reporterOr(opts.Progress), "restore"),
		expect: func(d archive.Database) progress.Expected { return archivePlan(opts.Source, d) },
		finish: func() error { return finishSource(opts) },
	}
	res, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// build is what a whole-server restore or clone does on the target: the
// globals, then each database (one), several at once within jobs
// connections, with the server journal (journal.ClusterRole) that lets --resume
// finish it.
type build struct {
	target        *pgx.ConnConfig // the database to connect to first
	id            string          // what is restored: the archive's (or the clone's) identity
	jobs          int
	clean, resume bool
	verb          string // for messages: "restore --all", "clone --all"
	of            string // what id names, for messages: "archive", "source"
	dbs           []archive.Database
	// resumable says a database's own journal can be resumed (restore);
	// a clone starts an unfinished database again (a fresh snapshot).
	resumable bool
	noOwner   bool // databases are created owned by the restoring user (--no-owner)
	globals   func() (string, error)
	gopts     GlobalsOptions
	one       func(ctx context.Context, name string, jobs int, s step, rep progress.Reporter) (*restore.Result, error)
	log       *slog.Logger
	progress  *progress.Parts // each database reports as one of its parts
	// expect is a database's work as known before it begins (the
	// archive's totals, the source's size), for the run's totals.
	expect func(archive.Database) progress.Expected
	// finish, when set, runs once every database is done, before the
	// server journal is dropped: what must hold for the run to be
	// finished (a pipe's archive read to its sound end).
	finish func() error
}

func (b *build) run(ctx context.Context) (*RestoreResult, error) {
	conn, err := pg.Connect(ctx, b.target)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	id := b.id
	j, err := journal.ReadCluster(ctx, conn)
	if err != nil {
		return nil, err
	}
	if j, err = Journal(j, id, b.clean, b.resume, b.verb, b.of); err != nil {
		return nil, err
	}
	// Only a journal found here vouches that the archive's databases the
	// target holds were created by this restore: those it lists as begun
	// (journal.Cluster.Begin).
	if j != nil {
		// A killed run's sessions may still be busy (a CREATE DATABASE,
		// an index build): what exists is known only once they are gone.
		if err := journal.WaitForOrphans(ctx, conn, journal.WholeCluster, b.log); err != nil {
			return nil, err
		}
	}
	existing, err := names(ctx, conn, "SELECT datname FROM pg_catalog.pg_database")
	if err != nil {
		return nil, fmt.Errorf("list the target's databases: %w", err)
	}
	if j == nil && !b.clean {
		for _, d := range b.dbs {
			if existing[d.Name] && d.Name != "postgres" {
				return nil, ExistingDatabase(d.Name, b.verb)
			}
		}
	}
	clean := b.clean || (j != nil && j.Clean)
	var script string
	if j == nil {
		b.progress.Phase("globals")
		if script, err = b.globals(); err != nil {
			return nil, fmt.Errorf("read globals: %w", err)
		}
	}
	if err := b.checkRecreate(ctx, conn, j, existing, clean, script); err != nil {
		return nil, err
	}
	res := &RestoreResult{}
	if j == nil {
		if err := journal.DiscardCluster(ctx, conn); err != nil {
			return nil, err
		}
		gopts := b.gopts
		gopts.Journal = func(ctx context.Context, tx pgx.Tx) (err error) {
			j, err = journal.CreateCluster(ctx, tx, id, b.clean)
			return err
		}
		res.Globals, err = applyGlobals(ctx, conn, script, gopts)
		if err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex // j and res.Databases
	done := map[string]bool{}
	for _, d := range j.Done {
		done[d] = true
	}
	b.progress.Phase("databases")
	var todo []archive.Database
	for _, d := range b.dbs {
		if done[d.Name] {
			res.Databases = append(res.Databases, DatabaseResult{Name: d.Name, Skipped: true})
			continue
		}
		todo = append(todo, d)
	}
	expected := map[string]progress.Expected{}
	for _, d := range todo {
		expected[d.Name] = b.expect(d)
	}
	b.progress.Expect(expected)
	g, gctx := errgroup.WithContext(ctx)
	schedule(gctx, g, todo, b.jobs, func(d archive.Database, jobs int) error {
		mu.Lock()
		begun := j.HasBegun(d.Name)
		mu.Unlock()
		s, err := b.step(gctx, d.Name, existing[d.Name], begun, clean)
		if err != nil {
			return err
		}
		// The drop (--clean) and the create that follow are one step of
		// the server journal, recorded before either: a run killed
		// between them is finished by --resume, which creates the
		// database again.
		mu.Lock()
		err = j.Begin(gctx, conn, d.Name)
		mu.Unlock()
		if err != nil {
			return err
		}
		r, err := b.one(gctx, d.Name, jobs, s, b.progress.Part(d.Name))
		if err != nil {
			return fmt.Errorf("database %s: %w", pg.Ident(d.Name), err)
		}
		mu.Lock()
		defer mu.Unlock()
		// Under mu, so the first connection's only user.
		if err := j.Finish(gctx, conn, d.Name); err != nil {
			return err
		}
		res.Databases = append(res.Databases, DatabaseResult{Name: d.Name, Result: r})
		return nil
	})
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s interrupted: %w", b.verb, context.Cause(ctx))
		}
		return nil, err
	}
	if b.finish != nil {
		if err := b.finish(); err != nil {
			return nil, err
		}
	}
	if err := journal.DropCluster(ctx, conn); err != nil {
		return nil, err
	}
	sort.Slice(res.Databases, func(a, b int) bool { return res.Databases[a].Name < res.Databases[b].Name })
	return res, nil
}

// restoreDatabase restores one database of the archive as step s says:
// created as pg_restore --create does (replaceDB: pg_restore --clean
// --create, which drops the target's just before it creates the
// archive's), or resumed from its own journal; postgres, which every
// server has, is restored into.
func restoreDatabase(ctx context.Context, opts RestoreOptions, name string, jobs int, s step, rep progress.Reporter) (*restore.Result, error) {
	src, err := archive.OpenDatabase(opts.Source, name)
	if err != nil {
		return nil, err
	}
	ro := opts.databaseOptions(jobs, rep)
	ro.Create, ro.Clean, ro.Resume = true, s == replaceDB, s == resumeDB
	ro.Logger = opts.Logger.With("database", name)
	if name == "postgres" {
		// Every server has one: restore into it, as pg_dumpall does
		// (its database-level properties stay the target's).
		ro.Target = opts.Target.Copy()
		ro.Target.Database, ro.Create = name, false
	}
	return restore.Run(ctx, src, ro)
}

// databaseOptions are the options of the restore of one database of the
// archive, built in this one place from the whole-server restore's: as
// given (--database: Create, Clean and Resume as the user said), which a
// restore of every database then adjusts for each.
func (opts RestoreOptions) databaseOptions(jobs int, rep progress.Reporter) restore.Options {
	ro := opts.Options
	// A database's view of the archive is no archive of its own: messages
	// about its bytes name no location (finishSource names it).
	ro.Jobs, ro.Progress, ro.Where = jobs, rep, ""
	return ro
}

// restoreOne restores one database of a server archive (--database).
func restoreOne(ctx context.Context, opts RestoreOptions, start time.Time) (*RestoreResult, error) {
	src, err := archive.OpenDatabase(opts.Source, opts.Database)
	if err != nil {
		return nil, err
	}
	r, err := restore.Run(ctx, src, opts.databaseOptions(opts.Jobs, opts.Progress))
	if err != nil {
		return nil, err
	}
	if err := finishSource(opts); err != nil {
		return nil, err
	}
	return &RestoreResult{Databases: []DatabaseResult{{Name: opts.Database, Result: r}}, Elapsed: time.Since(start)}, nil
}

// finishSource checks, once every database is restored, that an archive
// read front to back (a Demux: each stream was checked at its end, but
// the archive only at its trailer) was whole. The databases' own restores
// cannot: their view of the archive hides Finish, which waits for the
// archive's end and drops the streams nobody opened yet, other databases'
// included.
func finishSource(opts RestoreOptions) error {
	f, ok := opts.Source.(archive.Finisher)
	if !ok {
		return nil
	}
	if err := f.Finish(); err != nil {
		again := "run it again with --resume and a sound archive"
		if opts.Database != "" {
			again = "restore it again with --clean from a sound archive"
		}
		// The error says it is damaged, or incomplete and how many
		// bytes came.
		return fmt.Errorf("%w; the restore is not finished; %s", archive.On(opts.Where, err), again)
	}
	return nil
}

// archivePlan is what restoring database d of src will move, as far as
// the archive knows it now (a pipe's streams only once read; the
// database's restore reports its own plan when it begins).
func archivePlan(src archive.Source, d archive.Database) progress.Expected {
	p := progress.Expected{Op: "restore"}
	if m := d.Manifest; m != nil {
		p.Tables, p.Chunks = len(m.Tables), len(m.Chunks)+len(m.LargeObjects)
		p.Bytes, p.Rows = archive.Totals(src, m)
	}
	return p
}

// reporterOr is r, or a reporter that reports nowhere.
func reporterOr(r progress.Reporter) progress.Reporter {
	if r == nil {
		return progress.Nop{}
	}
	return r
}

// readAll reads one stream whole.
func readAll(src archive.Source, id uint32) (string, error) {
	r := src.OpenStream(id)
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}
