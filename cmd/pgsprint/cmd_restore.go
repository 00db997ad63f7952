package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pgsprint/pgsprint/internal/restore"
)

type restoreOptions struct {
	conn      connFlags
	log       logFlags
	file      string
	jobs      int
	create    bool
	clean     bool
	noOwner   bool
	noACL     bool
	mwm       string
	noAnalyze bool
	splitMin  int64
	spillDir  string
}

func newRestoreCmd() *cobra.Command {
	var o restoreOptions
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

The target must have no user tables unless --clean is given. With --create,
-d names the database to connect to first and the archived database is
created, as pg_restore --create does.

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
holds; a cut pipe fails with the target partly restored (use --clean).`,
		Example: `  createdb copy && pgsprint restore -f mydb.pgs -d copy
  pgsprint restore -f mydb.pgs -d postgres --create -j 8
  pgsprint restore -f mydb.pgs -d copy --clean
  pgsprint dump -d prod -f - | pgsprint restore -f - -d copy -j 8
  ssh db1 pgsprint dump -d prod | pgsprint restore -f - -d copy`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRestore(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	o.conn.register(fs)
	fs.StringVarP(&o.file, "file", "f", "", `archive file to read, "-" for standard input (required)`)
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel workers")
	fs.BoolVarP(&o.create, "create", "C", false, "create the archived database (connect to -d to do it)")
	fs.BoolVarP(&o.clean, "clean", "c", false, "drop the archive's objects before recreating them")
	fs.BoolVarP(&o.noOwner, "no-owner", "O", false, "do not restore object ownership")
	fs.BoolVarP(&o.noACL, "no-privileges", "x", false, "do not restore privileges (GRANT/REVOKE)")
	fs.StringVar(&o.mwm, "maintenance-work-mem", "512MB", "maintenance_work_mem of each connection, for index builds (empty: the server's)")
	fs.BoolVar(&o.noAnalyze, "no-analyze", false, "do not ANALYZE the restored tables")
	fs.StringVar(&o.spillDir, "spill-dir", os.TempDir(), "with -f -: where data that arrives before a connection can load it waits")
	fs.Int64Var(&o.splitMin, "split-min-bytes", 0, "smallest table loaded on several connections (0: 256 MiB, -1: never)")
	_ = fs.MarkHidden("split-min-bytes") // for benchmarks
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
	if o.file == "-" && term.IsTerminal(int(os.Stdin.Fd())) {
		return usageError{fmt.Errorf("refusing to read a binary archive from a terminal: pipe or redirect an archive into -f -")}
	}
	cfg, err := o.conn.Config()
	if err != nil {
		return usageError{err}
	}
	res, err := restore.Run(ctx, restore.Options{
		Target: cfg, File: o.file, Stdin: os.Stdin, SpillDir: o.spillDir, Jobs: o.jobs, Create: o.create, Clean: o.clean,
		NoOwner: o.noOwner, NoACL: o.noACL, MaintenanceWorkMem: o.mwm, NoAnalyze: o.noAnalyze, SplitMinBytes: o.splitMin,
		Logger: o.log.logger(),
	})
	if err != nil {
		return err
	}
	out := o.log.summaryOut()
	fmt.Fprintf(out, "restored %d tables (%d rows), %d sequences, %d large objects into %q in %s\n",
		res.Tables, res.Rows, res.Sequences, res.LargeObjects, res.Database, res.Elapsed.Round(1e6))
	printPhases(out, res)
	return nil
}

// printPhases writes the phase report: steps overlap, so each shows when it
// started, its span and the work summed over connections.
func printPhases(w io.Writer, res *restore.Result) {
	fmt.Fprintf(w, "  %-18s %9s %9s %9s %6s\n", "phase", "start", "wall", "busy", "items")
	for _, p := range res.Phases {
		busy, items := "", ""
		if p.Items > 0 {
			busy, items = dur(p.Busy), fmt.Sprint(p.Items)
		}
		fmt.Fprintf(w, "  %-18s %9s %9s %9s %6s\n", p.Name, dur(p.Start), dur(p.Elapsed), busy, items)
	}
	if len(res.Slowest) > 0 {
		var s []string
		for _, it := range res.Slowest {
			s = append(s, fmt.Sprintf("%s %s", it.Name, dur(it.Elapsed)))
		}
		fmt.Fprintf(w, "  slowest: %s\n", strings.Join(s, "; "))
	}
}
