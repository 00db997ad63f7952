// Package restore loads a pgsprint archive into a database: pre-data with
// pg_restore, sequences, then table data, large objects, indexes,
// constraints, foreign keys and ANALYZE as one dependency graph on N
// connections (internal/schedule), the rest of post-data with pg_restore,
// and materialized view refreshes.
package restore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
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
	// SplitMinBytes is the smallest chunk loaded on several connections at
	// once (0: 256 MiB; negative: never), for measuring the trade-off
	// against COPY FREEZE on one connection.
	SplitMinBytes int64
	Logger        *slog.Logger
}

// Result summarises a finished restore.
type Result struct {
	Database     string
	Tables       int
	Rows         int64
	LargeObjects int
	Sequences    int
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
	ar, closeSource, err := openSource(opts)
	if err != nil {
		return nil, err
	}
	defer closeSource()
	m := ar.Manifest()

	schemaFile, err := extractSchema(ar, m)
	if err != nil {
		return nil, err
	}
	defer os.Remove(schemaFile)

	r := &run{opts: opts, ar: ar, m: m, schema: schemaFile, log: log, begin: start,
		res: &Result{Tables: len(m.Tables), LargeObjects: len(m.LargeObjects), Sequences: len(m.Sequences)}}
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	r.res.Elapsed = time.Since(start)
	return r.res, nil
}

// run is the state of one restore.
type run struct {
	opts   Options
	ar     archive.Source
	m      *archive.Manifest
	schema string // pg_dump custom archive extracted to a temp file
	tools  pgbin.Tools
	target *pgx.ConnConfig
	log    *slog.Logger
	res    *Result
	begin  time.Time
}

func (r *run) phase(name string, fn func() error) error {
	t := time.Now()
	err := fn()
	r.res.Phases = append(r.res.Phases, Phase{Name: name, Start: t.Sub(r.begin), Elapsed: time.Since(t)})
	r.log.Info("phase done", "phase", name, "elapsed", time.Since(t).Round(time.Millisecond))
	return err
}

func (r *run) run(ctx context.Context) error {
	var err error
	if r.tools, err = pgbin.Find(ctx, majorOf(r.m.PgDumpVersion)); err != nil {
		return err
	}
	if err := r.phase("pre-data", func() error { return r.preData(ctx) }); err != nil {
		return err
	}
	r.res.Database = r.target.Database
	if err := r.phase("sequences", func() error { return r.setSequences(ctx) }); err != nil {
		return err
	}
	script, err := r.postDataScript(ctx)
	if err != nil {
		// Without a parsed table of contents, pg_restore does all of
		// post-data after the data is in.
		r.log.Warn("post-data left to pg_restore", "reason", err)
		script = nil
	}
	g, err := r.buildGraph(script)
	if err != nil {
		return err
	}
	if err := r.runGraph(ctx, g, script); err != nil {
		return err
	}
	if err := r.finishSource(); err != nil {
		return err
	}
	if script == nil {
		if err := r.phase("post-data", func() error { return r.postData(ctx) }); err != nil {
			return err
		}
	}
	return r.phase("refresh", func() error { return r.refreshMatviews(ctx) })
}

// preData prepares the target and creates the schema's pre-data objects.
func (r *run) preData(ctx context.Context) error {
	r.target = r.opts.Target
	if r.opts.Create {
		if err := r.pgRestore(ctx, r.opts.Target, "--section=pre-data", "--create", cleanFlag(r.opts.Clean)); err != nil {
			return err
		}
		r.target = r.opts.Target.Copy()
		r.target.Database = r.m.Database
		return nil
	}
	if r.opts.Clean {
		if err := r.dropArchivedObjects(ctx); err != nil {
			return err
		}
	} else if err := refuseNonEmpty(ctx, r.target); err != nil {
		return err
	}
	return r.pgRestore(ctx, r.target, "--section=pre-data")
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

// refuseNonEmpty stops a restore into a database that already holds user
// tables: loading on top of existing rows would duplicate or mix data.
func refuseNonEmpty(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	n, example, err := pg.CountUserTables(ctx, conn)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("target database %q is not empty: it has %d user tables (%s); restore into an empty database or use --clean", cfg.Database, n, example)
	}
	return nil
}
