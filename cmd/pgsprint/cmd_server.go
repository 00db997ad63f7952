package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/sqlscript"
)

// allDumpFlags are dump's whole-server flags.
type allDumpFlags struct {
	all     bool
	exclude []string
}

func (a *allDumpFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&a.all, "all", false, "dump the whole server: globals (roles, tablespaces) and every database, in one archive (see above)")
	fs.StringArrayVar(&a.exclude, "exclude-database", nil, "with --all: do not dump databases matching this pattern (as pg_dumpall; repeatable)")
}

func (a *allDumpFlags) check(snapshot string) error {
	switch {
	case !a.all && len(a.exclude) > 0:
		return usageError{fmt.Errorf("--exclude-database applies to --all only")}
	case a.all && snapshot != "":
		return usageError{fmt.Errorf("--all does not take --snapshot: each database is read in its own snapshot")}
	}
	return nil
}

// run is dump --all, with the one-database dump's options.
func (a *allDumpFlags) run(ctx context.Context, conn connFlags, o dump.Options, out io.Writer) (*dump.Result, error) {
	if conn.DSN == "" {
		o.Source.Database = "postgres"
	}
	res, err := cluster.Dump(ctx, cluster.DumpOptions{Options: o, ExcludeDatabases: a.exclude})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "databases: %s\n", strings.Join(res.Databases, ", "))
	if len(res.Skipped) > 0 {
		var s []string
		for _, d := range res.Skipped {
			s = append(s, fmt.Sprintf("%s (%s)", d.Name, d.Reason))
		}
		fmt.Fprintf(out, "skipped: %s\n", strings.Join(s, ", "))
	}
	return &res.Result, nil
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
	switch {
	case o.all.all && o.all.database != "":
		return usageError{fmt.Errorf("--all restores every database: it does not take --database")}
	case o.list.use != "":
		return usageError{fmt.Errorf("-L/--use-list does not combine with --all or --database")}
	case o.all.all && o.create:
		return usageError{fmt.Errorf("--all always creates the archive's databases: it does not take --create")}
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
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	if o.conn.DSN == "" {
		cfg.Database = "postgres"
	}
	if o.file == "-" && term.IsTerminal(int(os.Stdin.Fd())) {
		return usageError{fmt.Errorf("refusing to read a binary archive from a terminal: pipe or redirect an archive into -f -")}
	}
	// From a pipe, a Demux: each database restores as its streams arrive
	// (those not read yet wait in --spill-dir), while the dump still runs.
	f, err := openArchive(ctx, o.file, o.store.options(os.Stdin, nil, nil), archive.OpenOptions{Access: archive.Parallel, SpillDir: o.spillDir, Identities: o.ids})
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := o.progress.start("restore", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	res, err := cluster.Restore(ctx, cluster.RestoreOptions{
		Target: cfg, Source: f.Source, Where: f.String(), Jobs: o.jobs, Database: o.all.database, Create: o.create, Clean: o.clean,
		NoOwner: o.noOwner, NoACL: o.noACL, Resume: o.resume, Filter: o.filter, MaintenanceWorkMem: o.mwm,
		NoAnalyze: o.noAnalyze, NoStatistics: o.noStats, Logger: o.log.logger(), Progress: w.reporter,
	})
	if err != nil {
		return err
	}
	target := pg.Describe(cfg)
	if o.all.database != "" {
		target = strconv.Quote(o.all.database)
	}
	return w.finishServer(o.log, res, target, "restored")
}

// finishServer ends a whole-server run: the summary of every database
// (serverSummary) as --summary-json and the JSON progress stream have it,
// and for people its totals and a line per database.
func (w *watch) finishServer(l logFlags, res *cluster.RestoreResult, target, verb string) error {
	err := w.finish(serverSummary(w.tracker, res, target))
	printServerResult(w.textOut(l), res, verb)
	return err
}

// textOut is where a run's summary lines for people go: nowhere with -q,
// nor with --progress=json, whose every line is one JSON event.
func (w *watch) textOut(l logFlags) io.Writer {
	if w.flags.mode == string(progress.JSON) {
		return io.Discard
	}
	return l.summaryOut()
}

// serverSummary is the end-of-run summary of restore --all and clone
// --all: their totals, the globals, and each database with its phases.
func serverSummary(t *progress.Tracker, res *cluster.RestoreResult, target string) progress.Summary {
	s := t.Summary()
	s.Target, s.WallSeconds, s.Phases = target, res.Elapsed.Seconds(), nil
	s.Tables, s.Chunks, s.Rows, s.Sequences, s.LargeObj = 0, 0, 0, 0, 0
	if g := res.Globals; g != nil {
		s.Globals = &progress.GlobalsSummary{Roles: g.Roles, Tablespaces: g.Tablespaces, KeptRoles: g.KeptRoles}
	}
	s.Databases = []progress.DatabaseSummary{}
	for _, d := range res.Databases {
		if d.Skipped {
			s.Databases = append(s.Databases, progress.DatabaseSummary{Name: d.Name, Done: true})
			continue
		}
		one := restoreSummary(t, d.Result)
		s.Tables += d.Tables
		s.Chunks += d.Chunks
		s.Rows += d.Rows
		s.Sequences += d.Sequences
		s.LargeObj += d.LargeObjects
		s.Databases = append(s.Databases, progress.DatabaseSummary{Name: d.Name, WallSeconds: one.WallSeconds, Tables: d.Tables, Chunks: d.Chunks,
			Rows: d.Rows, Sequences: d.Sequences, LargeObj: d.LargeObjects, Resumed: d.Resumed, Phases: one.Phases})
	}
	return s
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

// serverListing is the JSON form of `pgsprint list` of a whole-server
// archive.
type serverListing struct {
	Manifest    *archive.Manifest         `json:"manifest"`
	Databases   []archive.DatabaseSummary `json:"databases"`
	Roles       []string                  `json:"roles,omitempty"`
	Tablespaces []string                  `json:"tablespaces,omitempty"`
	// DataRawBytes and DataStoredBytes are archive.DataTotals of every database.
	DataRawBytes    int64 `json:"data_raw_bytes"`
	DataStoredBytes int64 `json:"data_stored_bytes"`
}

// listServer is list of a whole-server archive: the globals' roles and
// tablespaces (read from a file; a pipe's stream is gone once listed) and
// each database's totals.
func listServer(ar *archive.Opened, m *archive.Manifest, streams []archive.StreamInfo, o listOptions, out io.Writer) error {
	l := serverListing{Manifest: m, Databases: archive.DatabaseSummaries(m, streams)}
	l.DataRawBytes, l.DataStoredBytes = archive.DataTotals(streams)
	r, random := ar.Source.(*archive.Reader)
	if random && m.Globals != nil {
		sr := r.OpenStream(m.Globals.Stream)
		b, err := io.ReadAll(sr)
		sr.Close()
		if err != nil {
			return fmt.Errorf("read globals: %w", err)
		}
		if l.Roles, l.Tablespaces, err = cluster.GlobalsObjects(string(b)); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(archive.MarkRaw(l))
	}
	fmt.Fprintf(out, "server:     PostgreSQL %s, %d databases (dump --all)\n", m.ServerVersion, len(m.Databases))
	fmt.Fprintf(out, "written by: pgsprint %s with pg_dump %s, format %d\n", m.ToolVersion, m.PgDumpVersion, m.FormatVersion)
	fmt.Fprintf(out, "codec:      %s level %d, %s blocks\n", m.Codec, m.Level, progress.Bytes(int64(m.BlockSize)))
	if random {
		fmt.Fprintf(out, "roles:      %s\n", orNone(l.Roles))
		fmt.Fprintf(out, "tablespaces: %s\n", orNone(l.Tablespaces))
	}
	if g := m.Globals; g != nil {
		if g.NoRolePasswords {
			fmt.Fprintln(out, "passwords:  not dumped (pg_authid was not readable)")
		}
		for _, d := range g.Skipped {
			fmt.Fprintf(out, "skipped:    %s (%s)\n", d.Name, d.Reason)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ndatabase\tsize\tencoding\ttables\trows\traw\tstored\tchunks\t")
	for _, d := range l.Databases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t\n", d.Name, progress.Bytes(d.SizeBytes), d.Encoding, len(d.Tables), d.Rows,
			progress.Bytes(d.RawBytes), progress.Bytes(d.StoredBytes), d.Chunks)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ndata:       %s raw, %s stored (tables and large objects of every database)\n", progress.Bytes(l.DataRawBytes), progress.Bytes(l.DataStoredBytes))
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
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
	case m.IsServer():
		var names []string
		for _, d := range m.Databases {
			names = append(names, d.Name)
		}
		return nil, fmt.Errorf("the archive holds a whole server (dump --all): give --database NAME to list or script one of its databases (%s)", strings.Join(names, ", "))
	}
	return ar, nil
}

// runCloneAll is clone --all.
func runCloneAll(ctx context.Context, o cloneOptions, src, dst *pgx.ConnConfig, method chunk.Method) error {
	switch {
	case o.filter.DataOnly:
		return usageError{fmt.Errorf("clone --all creates every database: it does not take --data-only")}
	case o.follow.on:
		return usageError{fmt.Errorf("clone --all does not take --follow: follow one database at a time")}
	}
	w, err := o.progress.start("clone", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	res, err := cluster.Clone(ctx, cluster.CloneOptions{
		Source: src, Target: dst, Jobs: o.jobs, Clean: o.clean, NoOwner: o.noOwner, NoACL: o.noACL, Filter: o.filter,
		MaintenanceWorkMem: o.mwm, NoAnalyze: o.noAnalyze, NoStatistics: o.noStats,
		Split: chunk.Options{ChunkSize: int64(o.chunkSize), Method: method}, LockWaitTimeout: o.lockWait, TextCopy: o.textCopy,
		ExcludeDatabases: o.all.exclude, Resume: o.resume, Version: version, Logger: o.log.logger(), Progress: w.reporter,
	})
	if errors.Is(err, cluster.ErrSameServer) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	return w.finishServer(o.log, res, pg.Describe(dst), "cloned")
}

// writeServerSQL is restore --to-sql --all.
func writeServerSQL(ctx context.Context, o restoreOptions, ar *archive.Reader, opts sqlscript.Options) error {
	if o.filter.Active() || o.filter.SchemaOnly || o.filter.DataOnly || o.list.use != "" || o.all.database != "" {
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
