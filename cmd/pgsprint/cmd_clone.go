package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

type cloneOptions struct {
	log       logFlags
	progress  progressFlags
	source    string
	target    string
	jobs      int
	clean     bool
	settings  restore.Settings // -O, -x, --maintenance-work-mem, --no-analyze, --no-statistics
	chunkSize sizeFlag
	splitBy   string
	snapshot  string
	resume    bool
	keepGoing bool
	filter    filter.Options
	lockWait  string
	textCopy  bool
	compat    compatFlags
	password  passwordFlags
	role      string
	follow    followFlags
	all       allDumpFlags
	rowFlags
}

// cloneCommand is clone's command with its flags, without RunE: clone itself and
// preflight clone take the same flags.
func cloneCommand() (*cobra.Command, *cloneOptions) {
	o := &cloneOptions{}
	cmd := &cobra.Command{
		Use:   "clone --source SRC --target DST [-j N] [--clean] [--snapshot ID [--resume]]",
		Short: "Copy a database into another, in parallel, without a file",
		Long: `Copy a database into another with no archive in between.

The source is read exactly as dump reads it: one exported snapshot shared by
pg_dump --schema-only and every reader, big tables cut into chunks, each
table locked only while it is read (see dump --help: a DDL on a table not
yet read stops the clone, naming it). The
target is built exactly as restore builds it: pre-data with pg_restore, then
N connections each stream a chunk from a source COPY TO straight into a
target COPY FROM (no compression, no disk), while indexes, constraints and
foreign keys of tables already copied are built beside the copying of the
others; the rest of post-data with pg_restore, ANALYZE, materialized views.
The target holds the source as of one instant.

Memory: about 1 MiB per connection for data in flight (four 256 KiB blocks).
The target must be empty (no object anyone created, as for restore) unless
--clean is given, and must not be the source database itself (refused,
exit 2). If the clone fails, the target is partly built: clone again with
--clean.

To be able to finish an interrupted clone, read the source in a snapshot
held by "pgsprint snapshot" (--snapshot ID). Every step then commits together
with a row in a journal kept in the target (schema pgsprint_journal, with
the clone's plan; dropped when the clone completes). If the clone is
interrupted, even killed, run the same command with --resume while the
snapshot is still held: the saved plan is reused, finished chunks, indexes
and constraints are skipped, the rest is copied from the same instant of the
source, and no row is lost or copied twice. --resume on a target with no
journal is an ordinary clone, so a script can always pass it.

-n/-N/-t/-T/--exclude-table-data select what is copied as restore selects
from an archive (a table with its indexes, constraints and owned sequences,
and its schema if the target lacks it);
--schema-only copies no rows; --data-only copies rows (and sequence values)
into existing, empty tables of the target, referenced tables first.

--all copies a whole server into another, as dump --all then restore --all
would, without a file (--source and --target name a database of each
server to connect to first, e.g. postgres): the globals first, then every
database of the source that allows connections, templates excepted
(--exclude-database PATTERN), each cloned in its own snapshot (PostgreSQL
has none across databases) into a database created as restore --create
creates it, several at once (see restore --all on connections). A killed
clone --all is finished by the same command with --resume: the globals and
the databases it finished are kept, each a copy of its source database as
of its own snapshot; the others are dropped and cloned again from the
start, in a new snapshot (a snapshot ends with the run that took it, so an
unfinished database cannot be continued where it stopped). --clean instead
starts the whole copy over.`,
		Example: `  createdb copy && pgsprint clone --source prod --target copy -j 8
  pgsprint clone --source "postgresql://app@db1/prod" --target "host=db2 dbname=prod" --clean

  pgsprint snapshot -d prod > snap.id &       # hold a snapshot (see pgsprint snapshot --help)
  until [ -s snap.id ]; do sleep 0.1; done
  pgsprint clone --source prod --target copy --snapshot "$(cat snap.id)" --resume
  # killed? run the same command again; then: kill %1

  pgsprint clone --source prod --target copy -n app -T 'app.log_*'
  pgsprint clone --source prod --target copy --data-only -t app.orders
  pgsprint clone --source prod --target dev --subset 'app.customers: id % 100 = 0' --subset-children --subset-others none
  pgsprint clone --all --source "host=old dbname=postgres" --target "host=new dbname=postgres" -j 8`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.source, "source", "", "source database: name, connection string or URI (PG* variables and .pgpass apply)")
	fs.StringVar(&o.target, "target", "", "target database: name, connection string or URI")
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel connections (each on the source and on the target)")
	fs.BoolVarP(&o.clean, "clean", "c", false, "drop the source's objects from the target first")
	registerSettingsFlags(fs, &o.settings, "target connection", "copied")
	o.chunkSize = chunk.DefaultSize
	fs.Var(&o.chunkSize, "chunk-size", "copy tables larger than this in chunks of about this size, in parallel (0: never split)")
	fs.StringVar(&o.splitBy, "split-by", string(chunk.Auto), "how to split big tables: auto, ctid or key")
	registerFilterFlags(fs, &o.filter, "clone")
	fs.StringArrayVar(&o.filter.ExcludeTableData, "exclude-table-data", nil, "copy the definition but not the rows of tables matching this pattern")
	fs.BoolVar(&o.textCopy, "text-copy", false, "copy in COPY's text format even where binary would do (same major version, built-in types)")
	_ = fs.MarkHidden("text-copy") // for benchmarks
	fs.StringVar(&o.lockWait, "lock-wait-timeout", "", "fail instead of waiting longer than this for a table lock while the catalog is read and while pg_dump locks the tables (e.g. 30s, 500ms, 2min; a bare number is milliseconds; as pg_dump); readers never wait: another session's DDL on a table not yet read stops the run at once, naming it")
	fs.StringVar(&o.snapshot, "snapshot", "", "read the source in this snapshot, held by \"pgsprint snapshot\", instead of exporting one")
	fs.BoolVar(&o.keepGoing, "keep-going", false, "go on past an object that fails, as pg_restore does without -e/--exit-on-error: what depends on it is skipped, the rest copied exactly; the end of the run names each failure and exits 1 (see restore --help)")
	fs.BoolVar(&o.resume, "resume", false, "finish an interrupted clone in the same --snapshot, skipping what it finished (with --all: skipping the databases it finished)")
	o.compat = compatFlags{cmd: "clone"}
	o.compat.register(fs, &o.filter)
	o.password.register(fs)
	fs.StringVar(&o.role, "role", "", "SET ROLE to this role on every connection, source and target, after logging in")
	o.follow.register(fs)
	o.all.register(fs)
	o.registerRows(fs)
	fs.BoolVar(&o.settings.NoStatistics, "no-statistics", false, "analyze the copied tables instead of copying the source's optimizer statistics (copied when both servers are 18 or later)")
	o.progress.register(fs)
	o.log.register(fs)
	return cmd, o
}

// check applies and checks the flags that need the parsed flag set.
func (o *cloneOptions) check(cmd *cobra.Command) error {
	if err := o.compat.apply(cmd.Flags(), &o.filter, o.clean); err != nil {
		return err
	}
	return o.applyRows(cmd.Flags())
}

func runClone(ctx context.Context, o cloneOptions) error {
	method, err := o.validate()
	if err != nil {
		return err
	}
	removeStale(o.log.logger(), "", tempfile.InTempDir()...)
	src, dst, err := o.configs(ctx)
	if err != nil {
		return err
	}
	if o.all.all {
		return runCloneAll(ctx, o, src, dst, method)
	}
	fo, err := o.follow.options(o, src, dst)
	if err != nil {
		return err
	}
	if fo != nil {
		return runCloneFollow(ctx, o, fo, func(ctx context.Context, snapshot string, f filter.Options) error {
			o.snapshot, o.filter = snapshot, f
			return cloneOne(ctx, o, src, dst, method)
		})
	}
	return cloneOne(ctx, o, src, dst, method)
}

// options are the clone's options, for one database or (cluster.Clone)
// for each of a server's.
func (o cloneOptions) options(src, dst *pgx.ConnConfig, method chunk.Method, w *watch) clone.Options {
	return clone.Options{
		Options: restore.Options{
			Target: dst, Jobs: o.jobs, Clean: o.clean, Settings: o.settings, Resume: o.resume, Filter: o.filter,
			Logger: o.log.logger(), Progress: w.reporter, Programs: &pgbin.Finder{}, KeepGoing: o.keepGoing,
		},
		Session: dump.SessionOptions{
			Source: src, Split: chunk.Options{ChunkSize: int64(o.chunkSize), Method: method}, Version: version,
			Snapshot: o.snapshot, SerializableDeferrable: o.compat.serialDef, LockWaitTimeout: o.lockWait,
			Subset: o.spec, Mask: o.masking,
		},
		TextCopy: o.textCopy,
	}
}

// validate refuses, before anything is touched, flags a clone cannot run
// with (usage errors), and parses the split method.
func (o *cloneOptions) validate() (chunk.Method, error) {
	if o.source == "" || o.target == "" {
		return "", usageError{fmt.Errorf("both --source and --target are required")}
	}
	if err := checkJobs(o.jobs); err != nil {
		return "", err
	}
	if err := o.all.check(o.snapshot); err != nil {
		return "", err
	}
	if o.resume && o.snapshot == "" && !o.all.all {
		return "", usageError{fmt.Errorf("--resume needs --snapshot: a clone can only be finished in the snapshot it began in, held by \"pgsprint snapshot\" (see pgsprint clone --help)")}
	}
	if err := checkLockWait(o.lockWait); err != nil {
		return "", err
	}
	if err := o.filter.Check(); err != nil {
		return "", usageError{err}
	}
	if o.filter.DataOnly && o.clean {
		return "", usageError{fmt.Errorf("--data-only copies into existing tables: it does not take --clean")}
	}
	if err := o.checkRows(o.all.all, o.resume, o.follow.on, o.filter.Selection, o.compat.statistics); err != nil {
		return "", err
	}
	method, err := chunk.ParseMethod(o.splitBy)
	if err != nil {
		return "", usageError{err}
	}
	return method, nil
}

// configs are the source's and target's connection configurations, with
// the password asked for on the terminal if a server wants one.
func (o *cloneOptions) configs(ctx context.Context) (src, dst *pgx.ConnConfig, err error) {
	src, err = pg.ConnOptions{DSN: o.source, Role: o.role}.Config()
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--source: %w", err)}
	}
	dst, err = pg.ConnOptions{DSN: o.target, Role: o.role}.Config()
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--target: %w", err)}
	}
	if err := o.password.resolve(ctx, src, dst); err != nil {
		return nil, nil, err
	}
	return src, dst, nil
}

// cloneOne is clone of one database, with its progress and summary.
func cloneOne(ctx context.Context, o cloneOptions, src, dst *pgx.ConnConfig, method chunk.Method) error {
	w, err := o.progress.start("clone", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	res, err := clone.Run(ctx, o.options(src, dst, method, w))
	if errors.Is(err, clone.ErrSameDatabase) {
		return usageError{err}
	}
	if res == nil {
		return err
	}
	return w.finishRestore(o.log, res, err)
}

// runCloneAll is clone --all.
func runCloneAll(ctx context.Context, o cloneOptions, src, dst *pgx.ConnConfig, method chunk.Method) error {
	if err := o.checkAll(); err != nil {
		return err
	}
	w, err := o.progress.start("clone", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	res, err := cluster.Clone(ctx, cluster.CloneOptions{Options: o.options(src, dst, method, w), ExcludeDatabases: o.all.exclude, NoRolePasswords: o.all.noPasswords})
	if errors.Is(err, cluster.ErrSameServer) || errors.Is(err, cluster.ErrNoDatabase) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	return w.finishServer(o.log, res, serverTarget(dst, len(res.Databases)), "cloned")
}

// checkAll refuses the flags clone --all does not take (for the run and
// its preflight).
func (o cloneOptions) checkAll() error {
	switch {
	case o.filter.DataOnly:
		return usageError{fmt.Errorf("clone --all creates every database: it does not take --data-only")}
	case o.follow.on:
		return usageError{fmt.Errorf("clone --all does not take --follow: follow one database at a time")}
	case o.keepGoing:
		return usageError{fmt.Errorf("--keep-going is not supported with clone --all yet: clone the databases one at a time with --keep-going")}
	}
	return nil
}
