package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/server"
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
	res, err := server.Dump(ctx, server.DumpOptions{
		Source: o.Source, File: o.File, Stdout: o.Stdout, Jobs: o.Jobs, Codec: o.Codec, BlockSize: o.BlockSize, Split: o.Split,
		Version: o.Version, Filter: o.Filter, LockWaitTimeout: o.LockWaitTimeout, NoStatistics: o.NoStatistics,
		ExcludeDatabases: a.exclude, Logger: o.Logger, Progress: o.Progress,
	})
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
	f, err := openWhole(o)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := server.Restore(ctx, server.RestoreOptions{
		Target: cfg, Source: f.Reader, Jobs: o.jobs, Database: o.all.database, Create: o.create, Clean: o.clean,
		NoOwner: o.noOwner, NoACL: o.noACL, Resume: o.resume, Filter: o.filter, MaintenanceWorkMem: o.mwm,
		NoAnalyze: o.noAnalyze, NoStatistics: o.noStats, Logger: o.log.logger(),
	})
	if err != nil {
		return err
	}
	out := o.log.summaryOut()
	if g := res.Globals; g != nil {
		fmt.Fprintf(out, "globals: %d roles and %d tablespaces created", g.Roles, g.Tablespaces)
		if len(g.KeptRoles) > 0 {
			fmt.Fprintf(out, "; kept as they are on the target: role %s", strings.Join(g.KeptRoles, ", "))
		}
		if len(g.KeptTablespaces) > 0 {
			fmt.Fprintf(out, "; existing tablespace %s (its location is the target's)", strings.Join(g.KeptTablespaces, ", "))
		}
		fmt.Fprintln(out)
	}
	for _, d := range res.Databases {
		if d.Skipped {
			fmt.Fprintf(out, "database %s: restored by the interrupted run\n", d.Name)
			continue
		}
		fmt.Fprintf(out, "database %s: %d tables, %d rows, %d sequences, %d large objects in %s",
			d.Name, d.Tables, d.Rows, d.Sequences, d.LargeObjects, d.Elapsed.Round(time.Millisecond))
		if d.Resumed > 0 {
			fmt.Fprintf(out, " (resumed: %d steps were already done)", d.Resumed)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "restored %d databases in %s\n", len(res.Databases), res.Elapsed.Round(time.Millisecond))
	return nil
}
