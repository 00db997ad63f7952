package main

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/restore"
)

type restoreOptions struct {
	conn    connFlags
	log     logFlags
	file    string
	jobs    int
	create  bool
	clean   bool
	noOwner bool
	noACL   bool
}

func newRestoreCmd() *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore -f FILE -d TARGET [-j N] [--create] [--clean]",
		Short: "Restore an archive into a database, in parallel",
		Long: `Restore a pgsprint archive into a database.

The schema's pre-data part is created with pg_restore, table data and large
objects are loaded on N connections at once, sequences are set, then
indexes, constraints and the rest of post-data are created with
pg_restore -j N and materialized views are refreshed.

The target must have no user tables unless --clean is given. With --create,
-d names the database to connect to first and the archived database is
created, as pg_restore --create does.`,
		Example: `  createdb copy && pgsprint restore -f mydb.pgs -d copy
  pgsprint restore -f mydb.pgs -d postgres --create -j 8
  pgsprint restore -f mydb.pgs -d copy --clean`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRestore(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	o.conn.register(fs)
	fs.StringVarP(&o.file, "file", "f", "", "archive file to read (required)")
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel workers")
	fs.BoolVarP(&o.create, "create", "C", false, "create the archived database (connect to -d to do it)")
	fs.BoolVarP(&o.clean, "clean", "c", false, "drop the archive's objects before recreating them")
	fs.BoolVarP(&o.noOwner, "no-owner", "O", false, "do not restore object ownership")
	fs.BoolVarP(&o.noACL, "no-privileges", "x", false, "do not restore privileges (GRANT/REVOKE)")
	o.log.register(fs)
	cmd.Flags().BoolP("help", "", false, "show this help")
	return cmd
}

func runRestore(ctx context.Context, o restoreOptions) error {
	if o.file == "" {
		return usageError{fmt.Errorf("no archive file given: use -f FILE")}
	}
	if o.conn.DSN == "" && !o.create {
		return usageError{fmt.Errorf("no target database given: use -d TARGET")}
	}
	if o.jobs < 1 {
		return usageError{fmt.Errorf("-j must be at least 1")}
	}
	cfg, err := o.conn.Config()
	if err != nil {
		return usageError{err}
	}
	res, err := restore.Run(ctx, restore.Options{
		Target: cfg, File: o.file, Jobs: o.jobs, Create: o.create, Clean: o.clean,
		NoOwner: o.noOwner, NoACL: o.noACL, Logger: o.log.logger(),
	})
	if err != nil {
		return err
	}
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, fmt.Sprintf("%s %s", p.Name, p.Elapsed.Round(1e6)))
	}
	fmt.Fprintf(o.log.summaryOut(), "restored %d tables (%d rows), %d sequences, %d large objects into %q in %s (%s)\n",
		res.Tables, res.Rows, res.Sequences, res.LargeObjects, res.Database, res.Elapsed.Round(1e6), strings.Join(phases, ", "))
	return nil
}
