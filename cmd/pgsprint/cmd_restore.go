package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"filippo.io/age"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/sqlscript"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

type restoreOptions struct {
	conn      connFlags
	log       logFlags
	file      string
	jobs      int
	create    bool
	clean     bool
	settings  restore.Settings // -O, -x, --maintenance-work-mem, --no-analyze, --no-statistics
	splitMin  int64
	preSplit  int
	profile   string
	resume    bool
	progress  progressFlags
	toSQL     bool
	spillDir  string
	filter    filter.Options
	noTrig    bool
	all       allRestoreFlags
	compat    compatFlags
	exitOnErr bool
	keepGoing bool
	single    bool
	list      listFlags
	keys      keyFlags
	ids       []age.Identity // read from keys once
	store     storeFlags
}

// listFlags are restore's -l and -L, pg_restore's table of contents flags.
type listFlags struct {
	print bool   // -l: print the table of contents, restore nothing
	use   string // -L: restore only the entries this list keeps
}

func (l *listFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&l.print, "list", "l", false, "print the archive's table of contents in pg_restore --list's format (no database needed) and exit")
	fs.StringVarP(&l.use, "use-list", "L", "", "restore only the entries this list (edited output of -l, or of pg_restore -l of the schema) keeps; \";\" comments a line out")
}

// restoreCommand is restore's command with its flags, without RunE: restore itself and
// preflight restore take the same flags.
func restoreCommand() (*cobra.Command, *restoreOptions) {
	o := &restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore -f FILE|- -d TARGET [-j N] [--create] [--clean]",
		Short: "Restore an archive into a database, in parallel",
		Long: `Restore a pgsprint archive into a database.

The schema's pre-data part is created with pg_restore and sequences are set.
Then N connections load table data and large objects (a large table on
several connections at once) and build each table's indexes as soon as its
rows are in: PRIMARY KEY and UNIQUE constraints as unique indexes then
attached, foreign keys added NOT VALID then validated in parallel, largest
work first. The rest of post-data (triggers, policies, comments, grants, ...)
is restored by pg_restore in pg_dump's order, tables are analyzed and
materialized views refreshed. A report of the phases and the slowest steps
ends the run.

The target must be empty unless --clean is given: no table, sequence, view,
type, function, schema (but public), extension (but plpgsql), large object
or any other object anyone created; it is checked before anything is
created, and the first objects found are named. With --create, -d names the
database to connect to first and the archived database is created, as
pg_restore --create does.

Every step commits together with a row in a journal kept in the target
(schema pgsprint_journal, dropped when the restore completes). If a restore
is interrupted, even killed, run the same command with --resume: finished
chunks, indexes and constraints are skipped, the rest is done, and no row is
lost or loaded twice. A target holding an unfinished restore is refused
without --resume (or --clean, to start over). --resume drops only what the
interrupted run created: if its pre-data was cut short, the archive's
objects in the target are dropped and created again, which is safe because
the journal records that the target held none of them when the restore
began.

With -f - the archive is read from standard input as it arrives (from
"pgsprint dump -f -", through any byte pipe such as ssh) and still loaded on
N connections: blocks are routed to the stream they belong to. Memory stays
bounded: at most 4 blocks (of the dump's --block-size, 1 MiB by default)
wait for each stream being loaded, about N x 5 MiB of data in all whatever
the database size (about 100 MiB peak RSS at -j 8). Blocks of streams no connection is loading yet (the dump had
more workers than the restore has connections, or pg_dump's schema came
late) are written to unlinked files in --spill-dir and read back when their
turn comes; so the restore never deadlocks and never holds unbounded data
in memory, at the cost of at most the spilled data in disk space. The
restore succeeds only if the archive's trailer arrives and every checksum
holds; a cut pipe fails with the target partly restored (restore the whole
archive again with --resume to finish it, or with --clean to start over).

A restore stops at its first error (pg_restore's -e/--exit-on-error).
--keep-going goes on past an object that fails, as pg_restore does by
default: what depends on it (a table on a missing collation, its data,
indexes and foreign keys, a view on it) is skipped, everything else is
restored exactly, and the end of the run lists each failure with the
server's error and what was skipped because of it, then exits 1. The
journal stays: once the target has what it lacked (an extension, a role, a
tablespace), --resume finishes the skipped objects.

-n/-N/-t/-T restore part of the archive, with pg_dump's patterns (a pattern
without a schema matches in every schema, as in pg_restore): a table comes
with its indexes, constraints, triggers, policies, owned sequences,
comments and privileges; a foreign key only if the table it references is
restored too; a schema with everything in it. The target may hold other
objects, but not the relations being restored (unless --clean, which drops
only those). Large objects come only with the whole archive.
--schema-only creates the objects without rows. --data-only loads rows and
sequence values into existing, empty tables (referenced tables first;
--disable-triggers, for a superuser, turns triggers and foreign key checks
off instead); an archive dumped with --data-only always restores that way.
With --to-sql the selection is written as if into an empty database; with
-f - the archive is first copied whole into an unlinked file in --spill-dir,
since the script needs its parts in order.

-l prints the archive's table of contents in pg_restore --list's format,
without connecting anywhere: pg_dump's schema entries with their dump IDs,
and pgsprint's own data entries (TABLE DATA, SEQUENCE SET, MATERIALIZED
VIEW DATA, BLOBS for all large objects), numbered after the schema's
highest ID. -L FILE restores only the entries such a list keeps (";"
comments a line out), as pg_restore -L does, on N connections; the order
of the lines does not matter. A list made from pg_restore -l of the schema
alone (no data entries at all) loads the data of every table, sequence and
materialized view whose entry it keeps, and the large objects. -L does not
combine with -n/-N/-t/-T: edit the list instead.

An archive dumped by pgsprint with pg_dump 18 or later carries the source's
optimizer statistics: restored into PostgreSQL 18 or later, they come back
after the data (tables, indexes, materialized views), and tables whose
statistics came back are not analyzed. --no-statistics analyzes instead.

--to-sql writes a script for psql that is all or nothing, as pg_restore
--single-transaction: it sets ON_ERROR_STOP, begins with BEGIN, and ends
with COMMIT, written only after the whole archive has been read and every
checksum and row count has held. A COPY block holds whole rows only. If the
archive is damaged or cut short, pgsprint exits 1 and the script ends with
a statement that fails instead of COMMIT: psql stops and the database is
left as it was (if pgsprint is killed, the script just ends without
COMMIT, and the server rolls back when psql's session ends). Everything in
the script runs inside a transaction block (no CREATE DATABASE: --to-sql
does not take --create); sequence values are set after the last row is
read, and setval, unlike the rest, is not undone by a rollback.

--all restores a whole-server archive (dump --all) through -d (default
postgres): the globals first (roles, memberships, role settings and
tablespaces, in one transaction; a role the target already has is kept as
it is and reported; a tablespace's directory must exist on the target, or
--no-tablespaces puts everything in the default one), then every database,
created as --create does (owner, encoding, locale, privileges, settings;
the database postgres, which every server has, is restored into), several
at once, the biggest first: databases of 64 MiB or more share -j
connections in proportion to their size; smaller ones, whose restore mostly
waits on the server (CREATE DATABASE, pg_restore's processes), take one
connection each beside them, up to 2x -j connections in all. A database of the archive that already
exists is refused unless --clean, which drops it first. An interrupted
--all restore is finished exactly by the same command with --resume (the
globals are one step, each database resumes from its own journal). From a
pipe (dump --all -f - | restore --all -f -) each database restores as its
part of the archive arrives, while the dump runs; the archive is known
whole only at its end, and the run succeeds only then.
--database NAME restores one database of a whole-server archive, into -d,
or under its own name with --create. --to-sql --all writes a script like
pg_dumpall's for an empty server: the globals (run by psql without
ON_ERROR_STOP, as pg_dumpall's, so that an existing role is an error psql
reports and passes), then for each database its CREATE DATABASE and
\connect, and its own all-or-nothing part as --to-sql writes it.`,
		Example: `  createdb copy && pgsprint restore -f mydb.pgs -d copy
  pgsprint restore -f mydb.pgs -d postgres --create -j 8
  pgsprint restore -f mydb.pgs -d copy --clean
  pgsprint restore -f mydb.pgs -d copy --resume     # finish an interrupted restore
  pgsprint restore -f mydb.pgs -d prod -t app.orders --clean   # one table back, with its indexes
  pgsprint restore -f mydb.pgs -d copy -n app -T 'app.log_*'
  pgsprint restore -f mydb.pgs -d copy --data-only  # rows into an existing schema
  pgsprint restore -f mydb.pgs -l > mydb.list      # edit: ";" comments an entry out
  pgsprint restore -f mydb.pgs -d copy -L mydb.list
  pgsprint dump -d prod -f - | pgsprint restore -f - -d copy -j 8
  pgsprint restore -f s3://backups/prod.pgs -d copy -j 8      # ranged reads, in parallel
  pgsprint restore -f "https://host/prod.pgs?X-Amz-..." -d copy   # any URL serving ranges (a pre-signed URL)
  ssh db1 pgsprint dump -d prod | pgsprint restore -f - -d copy
  pgsprint restore -f mydb.pgs --to-sql > mydb.sql && psql -X -d copy -f mydb.sql
  pgsprint restore -f mydb.pgs --to-sql | psql -X -d copy   # all or nothing
  pgsprint restore -f mydb.pgs -d copy --filter tables.txt --no-tablespaces --role app_owner -O
  pgsprint restore --all -f server.pgs -d postgres -j 8     # a whole server, from dump --all
  pgsprint restore -f server.pgs --database app -d postgres --create`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	o.conn.register(fs)
	fs.StringVarP(&o.file, "file", "f", "", `archive file to read, s3://bucket/key, an http(s):// URL, or "-" for standard input (required)`)
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel workers")
	fs.BoolVarP(&o.create, "create", "C", false, "create the archived database (connect to -d to do it)")
	fs.BoolVarP(&o.clean, "clean", "c", false, "drop the archive's objects before recreating them")
	registerSettingsFlags(fs, &o.settings, "connection, for index builds", "restored")
	registerFilterFlags(fs, &o.filter, "restore")
	fs.StringArrayVar(&o.filter.ExcludeTableData, "exclude-table-data", nil, "create but do not load tables matching this pattern")
	fs.BoolVar(&o.noTrig, "disable-triggers", false, "with --data-only: load with triggers and foreign key checks off (superuser)")
	fs.BoolVar(&o.resume, "resume", false, "finish an interrupted restore of the same archive, skipping what it finished")
	fs.StringVar(&o.spillDir, "spill-dir", os.TempDir(), "with -f -: where data that arrives before a connection can load it waits (with --to-sql: the whole archive)")
	fs.Int64Var(&o.splitMin, "split-min-bytes", 0, "smallest table loaded on several connections (0: 256 MiB, -1: never)")
	_ = fs.MarkHidden("split-min-bytes") // for benchmarks
	fs.IntVar(&o.preSplit, "pre-data-split-min", 0, "fewest independent schema entries created on several connections at once (0: 200, -1: never)")
	_ = fs.MarkHidden("pre-data-split-min") // for tests and benchmarks
	fs.StringVar(&o.profile, "cpu-profile", "", "write a Go CPU profile of the restore to this file")
	_ = fs.MarkHidden("cpu-profile")
	fs.BoolVar(&o.toSQL, "to-sql", false, "write the archive as one plain SQL script (one transaction) to standard output, for psql, instead of restoring it")
	o.compat = compatFlags{cmd: "restore"}
	o.compat.register(fs, &o.filter)
	fs.BoolVarP(&o.exitOnErr, "exit-on-error", "e", false, "stop at the first error (pgsprint restore does unless --keep-going: accepted for pg_restore's sake)")
	fs.BoolVar(&o.keepGoing, "keep-going", false, "go on past an object that fails, as pg_restore does without -e/--exit-on-error: what depends on it is skipped, the rest restored exactly; the end of the run names each failure and exits 1, and --resume finishes once the target has what it lacked")
	fs.BoolVarP(&o.single, "single-transaction", "1", false, "with --to-sql only (whose script is always one transaction): see docs/guide/pg-dump-flags.md")
	o.list.register(fs)
	o.all.register(fs)
	fs.BoolVar(&o.settings.NoStatistics, "no-statistics", false, "do not restore the archive's optimizer statistics (PostgreSQL 18+): analyze the tables instead")
	o.keys.register(fs)
	o.store.register(fs, false)
	o.progress.register(fs)
	o.log.register(fs)
	return cmd, o
}

// check applies and checks the flags that need the parsed flag set.
func (o *restoreOptions) check(cmd *cobra.Command) error {
	if err := o.compat.apply(cmd.Flags(), &o.filter, o.clean); err != nil {
		return err
	}
	if o.file == "-" && slices.Contains(o.compat.filterFile, "-") {
		return usageError{fmt.Errorf("-f - and --filter - cannot both read standard input: give the filter file by name")}
	}
	if o.keepGoing && o.exitOnErr {
		return usageError{fmt.Errorf("--keep-going and -e/--exit-on-error contradict each other: give one")}
	}
	if o.single && !o.toSQL {
		return usageError{fmt.Errorf("-1/--single-transaction is not supported by pgsprint restore: it loads on -j connections at once, each step committed with its journal row so that --resume can finish it; " +
			"for one transaction, pipe --to-sql into psql (pgsprint restore -f FILE --to-sql | psql -X -d TARGET), whose script is one")}
	}
	if o.toSQL && o.filter.StatisticsOnly {
		return usageError{fmt.Errorf("--statistics-only does not combine with --to-sql: the script leaves optimizer statistics out")}
	}
	return nil
}

func runRestore(ctx context.Context, o restoreOptions) error {
	if o.file == "" {
		return usageError{fmt.Errorf("no archive file given: use -f FILE")}
	}
	if err := notTerminal(o.file, os.Stdin); err != nil {
		return err
	}
	ids, err := o.keys.identities()
	if err != nil {
		return err
	}
	o.ids = ids
	removeStale(o.log.logger(), "", tempfile.InTempDir()...)
	if o.file == "-" {
		removeStale(o.log.logger(), o.spillDir, tempfile.Spill, tempfile.Stdin)
	}
	if o.list.print {
		return printList(ctx, o)
	}
	if o.list.use != "" && o.filter.Active() {
		return usageError{fmt.Errorf("-L/--use-list does not combine with -n/-N/-t/-T/--exclude-table-data: edit the list instead")}
	}
	if o.toSQL {
		return writeSQL(ctx, o)
	}
	if o.profile != "" {
		stop, err := startCPUProfile(o.profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if o.all.all || o.all.database != "" {
		return runRestoreAll(ctx, o)
	}
	if err := o.validate(); err != nil {
		return err
	}
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	w, err := o.progress.start("restore", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	f, err := openParallel(ctx, o)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := restore.Run(ctx, f.Source, o.options(cfg, f.String(), w.reporter))
	if res == nil {
		return err
	}
	return w.finishRestore(o.log, res, err)
}

// options are the restore's options, said once from the flags for a
// restore of one database and for every database of --all and --database
// (cluster.RestoreOptions embeds them): a flag either reaches them or is
// the command's own (TestRestoreFlagsReachOptions).
func (o restoreOptions) options(target *pgx.ConnConfig, where string, rep progress.Reporter) restore.Options {
	return restore.Options{
		Target: target, Where: where, Jobs: o.jobs, Create: o.create, Clean: o.clean,
		Settings: o.settings, SplitMinBytes: o.splitMin, PreDataSplitMin: o.preSplit,
		Resume: o.resume, Filter: o.filter, DisableTriggers: o.noTrig, UseList: o.list.use, KeepGoing: o.keepGoing,
		Logger: o.log.logger(), Progress: rep, Programs: &pgbin.Finder{},
	}
}

// validate refuses, before anything is touched, flags a restore of one
// database cannot run with (usage errors).
func (o *restoreOptions) validate() error {
	if o.conn.DSN == "" && !o.create {
		return usageError{fmt.Errorf("no target database given: use -d TARGET")}
	}
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	if err := o.filter.Check(); err != nil {
		return usageError{err}
	}
	if o.filter.DataOnly && (o.create || o.clean) {
		return usageError{fmt.Errorf("--data-only loads into existing tables: it does not take --create or --clean")}
	}
	if o.noTrig && o.filter.NoRows() {
		// Without -a it is the archive's to say (one dumped with
		// --data-only or --no-schema restores as data only).
		return usageError{fmt.Errorf("--disable-triggers applies to --data-only restores only")}
	}
	return nil
}

// writeSQL is restore --to-sql: the archive as a plain SQL script on
// standard output.
func writeSQL(ctx context.Context, o restoreOptions) error {
	if o.create || o.clean {
		return usageError{fmt.Errorf("--to-sql does not take --create or --clean: load the script into the database you want")}
	}
	if o.noTrig {
		return usageError{fmt.Errorf("--to-sql does not take --disable-triggers")}
	}
	// The script is written in the manifest's order, which a pipe
	// does not deliver: the archive waits whole in --spill-dir.
	f, err := openWhole(ctx, o)
	if err != nil {
		return err
	}
	defer f.Close()
	opts := sqlscript.Options{Settings: o.settings, ToolArgs: o.filter.PgRestoreArgs(), Role: o.conn.Role}
	ar, err := wholeReader(f)
	if err != nil {
		return err
	}
	if o.all.all {
		return writeServerSQL(ctx, o, ar, opts)
	}
	src, err := databaseView(ar, o.all)
	if err != nil {
		return err
	}
	if o.filter.Partial() || o.filter.StrictNames || o.list.use != "" {
		// As restored into an empty database: the schemas of selected
		// tables come too, foreign keys to tables left out do not.
		sel, err := restore.SelectList(ctx, src, o.filter, o.list.use, o.log.logger())
		if err != nil {
			return err
		}
		defer sel.Close()
		opts.Selection = sel
	}
	out := &pipeOut{w: os.Stdout}
	return out.result(sqlscript.Write(ctx, src, out, opts))
}

// openWhole opens the archive -f names to read its parts in the
// manifest's order: an archive on standard input is first copied whole
// into --spill-dir.
func openWhole(ctx context.Context, o restoreOptions) (*archive.Opened, error) {
	return openArchive(ctx, o.file, o.store.options(os.Stdin, nil, nil), archive.OpenOptions{Access: archive.Ordered, SpillDir: o.spillDir, Identities: o.ids})
}

// openParallel opens the archive -f names to restore it on -j
// connections: an archive on standard input is read as it arrives, its
// streams taken apart (those no connection reads yet wait in --spill-dir).
func openParallel(ctx context.Context, o restoreOptions) (*archive.Opened, error) {
	return openArchive(ctx, o.file, o.store.options(os.Stdin, nil, nil), archive.OpenOptions{Access: archive.Parallel, SpillDir: o.spillDir, Identities: o.ids})
}

// printList is restore -l: the archive's table of contents, as pg_restore
// -l prints a custom archive's, with pgsprint's data entries; no database.
func printList(ctx context.Context, o restoreOptions) error {
	if o.list.use != "" || o.toSQL {
		return usageError{fmt.Errorf("-l/--list prints the table of contents and restores nothing: it does not take -L or --to-sql")}
	}
	f, err := openWhole(ctx, o)
	if err != nil {
		return err
	}
	defer f.Close()
	ar, err := wholeReader(f)
	if err != nil {
		return err
	}
	src, err := databaseView(ar, o.all)
	if err != nil {
		return err
	}
	out := &pipeOut{w: os.Stdout}
	return out.result(restore.List(ctx, src, out, o.log.logger()))
}

// finishRestore ends the run of a restore or a clone of one database
// (res, not nil): the summary, then runErr (--keep-going's
// IncompleteError: the summary named each failure), then the steps a
// resumed run found already done.
func (w *watch) finishRestore(l logFlags, res *restore.Result, runErr error) error {
	if err := w.finish(restoreSummary(w.tracker, res)); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if res.Resumed > 0 {
		fmt.Fprintf(l.summaryOut(), "  resumed: %d steps were already done by the interrupted run\n", res.Resumed)
	}
	return nil
}

// restoreSummary is the end-of-run summary of a restore or a clone. The
// restore's own phase report is finer than the tracker's: scheduled steps
// overlap, and it knows each one's span and busy time.
func restoreSummary(t *progress.Tracker, res *restore.Result) progress.Summary {
	s := t.Summary()
	s.Target = strconv.Quote(res.Database)
	s.Tables, s.Chunks, s.Rows, s.Sequences, s.LargeObj = res.Tables, res.Chunks, res.Rows, res.Sequences, res.LargeObjects
	s.CopyFormat = res.CopyFormat
	s.WallSeconds = res.Elapsed.Seconds()
	s.Phases = nil
	for _, p := range res.Phases {
		s.Phases = append(s.Phases, progress.PhaseTime{Name: p.Name, Start: p.Start, Elapsed: p.Elapsed, Busy: p.Busy, Items: p.Items})
	}
	for _, it := range res.Slowest {
		s.Slowest = append(s.Slowest, progress.Step{Name: it.Name, Seconds: it.Elapsed.Seconds()})
	}
	for _, f := range res.Failures {
		s.Failures = append(s.Failures, progress.Failure(f))
		switch {
		case f.Kept:
			s.Kept++
		default:
			s.Failed++
			s.Skipped += len(f.Skipped)
		}
	}
	return s
}

// allRestoreFlags are restore's whole-server flags.
type allRestoreFlags struct {
	all      bool
	database string
}

func (a *allRestoreFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&a.all, "all", false, "restore a whole-server archive (dump --all): globals, then every database (see above)")
	fs.StringVar(&a.database, "database", "", "restore only this database of a whole-server archive (into -d, or with --create under its own name)")
}

// runRestoreAll is restore --all and restore --database.
func runRestoreAll(ctx context.Context, o restoreOptions) error {
	if err := o.checkAll(); err != nil {
		return err
	}
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	if o.conn.DSN == "" {
		cfg.Database = "postgres"
	}
	// From a pipe, a Demux: each database restores as its streams arrive
	// (those not read yet wait in --spill-dir), while the dump still runs.
	f, err := openParallel(ctx, o)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := o.progress.start("restore", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	res, err := cluster.Restore(ctx, cluster.RestoreOptions{Options: o.options(cfg, f.String(), w.reporter), Source: f.Source, Database: o.all.database})
	if err != nil {
		return err
	}
	target := serverTarget(cfg, len(res.Databases))
	if o.all.database != "" {
		target = strconv.Quote(o.all.database)
	}
	return w.finishServer(o.log, res, target, "restored")
}

// checkAll refuses the flags restore --all and restore --database do not
// take (for the run and its preflight).
func (o restoreOptions) checkAll() error {
	switch {
	case o.all.all && o.all.database != "":
		return usageError{fmt.Errorf("--all restores every database: it does not take --database")}
	case o.list.use != "":
		return usageError{fmt.Errorf("-L/--use-list does not combine with --all or --database")}
	case o.all.all && o.create:
		return usageError{fmt.Errorf("--all always creates the archive's databases: it does not take --create")}
	case o.keepGoing:
		return usageError{fmt.Errorf("--keep-going is not supported with --all or --database yet: restore the databases one at a time with --keep-going")}
	case o.all.all && (o.filter.DataOnly || o.noTrig):
		return usageError{fmt.Errorf("--all does not take --data-only or --disable-triggers")}
	case o.all.database != "" && o.conn.DSN == "" && !o.create:
		return usageError{fmt.Errorf("no target database given: use -d TARGET, or --create to create %q", o.all.database)}
	}
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	if err := o.filter.Check(); err != nil {
		return usageError{err}
	}
	return nil
}

// printServerResult is the summary of restore --all and clone --all.
func printServerResult(out io.Writer, res *cluster.RestoreResult, verb string) {
	if g := res.Globals; g != nil {
		fmt.Fprintf(out, "globals: %d roles and %d tablespaces created", g.Roles, g.Tablespaces)
		if len(g.KeptRoles) > 0 {
			fmt.Fprintf(out, "; kept as they are on the target: role %s", strings.Join(g.KeptRoles, ", "))
		}
		if len(g.DifferentRoles) > 0 {
			fmt.Fprintf(out, "; attributes not changed: %s", strings.Join(g.DifferentRoles, "; "))
		}
		if len(g.KeptTablespaces) > 0 {
			fmt.Fprintf(out, "; existing tablespace %s (its location is the target's)", strings.Join(g.KeptTablespaces, ", "))
		}
		fmt.Fprintln(out)
	}
	for _, d := range res.Databases {
		if d.Skipped {
			fmt.Fprintf(out, "database %s: %s by the interrupted run\n", d.Name, verb)
			continue
		}
		fmt.Fprintf(out, "database %s: %d tables, %d rows, %d sequences, %d large objects in %s",
			d.Name, d.Tables, d.Rows, d.Sequences, d.LargeObjects, d.Elapsed.Round(time.Millisecond))
		if d.Resumed > 0 {
			fmt.Fprintf(out, " (resumed: %d steps were already done)", d.Resumed)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%s %d databases in %s\n", verb, len(res.Databases), res.Elapsed.Round(time.Millisecond))
}

// databaseView is what -l and --to-sql read: a one-database archive, or
// the database --database names in a whole-server archive.
func databaseView(ar *archive.Reader, a allRestoreFlags) (archive.Source, error) {
	m := ar.Manifest()
	switch {
	case a.all:
		return nil, usageError{fmt.Errorf("-l lists one database at a time: use --database NAME instead of --all")}
	case a.database != "":
		return archive.OpenDatabase(ar, a.database)
	case m.IsCluster():
		var names []string
		for _, d := range m.Databases {
			names = append(names, d.Name)
		}
		return nil, fmt.Errorf("the archive holds a whole server (dump --all): give --database NAME to list or script one of its databases (%s)", strings.Join(names, ", "))
	}
	return ar, nil
}

// writeServerSQL is restore --to-sql --all.
func writeServerSQL(ctx context.Context, o restoreOptions, ar *archive.Reader, opts sqlscript.Options) error {
	if o.filter.Partial() || o.list.use != "" || o.all.database != "" {
		return usageError{fmt.Errorf("--to-sql --all writes the whole server: it does not take -n/-N/-t/-T, --schema-only, --data-only, -L or --database")}
	}
	out := &pipeOut{w: os.Stdout}
	return out.result(cluster.WriteScript(ctx, ar, out, cluster.ScriptOptions{Options: opts, NoTablespaces: o.filter.Objects.NoTablespaces}))
}

// wholeReader is the Reader of an archive opened whole (openWhole: random
// access, or spooled from a pipe), which a whole-server archive's
// per-database views need.
func wholeReader(f *archive.Opened) (*archive.Reader, error) {
	r, ok := f.Source.(*archive.Reader)
	if !ok {
		return nil, fmt.Errorf("archive on %s: cannot be read by random access", f)
	}
	return r, nil
}
