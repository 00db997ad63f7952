// Command restore benchmarks `pgsprint restore -j N` against
// `pg_restore -j N` from `pg_dump -Fd -j N` of the same database, alone and
// followed by `vacuumdb --analyze-only -j N` (pg_restore leaves the tables
// unanalyzed, pgsprint restore analyzes them), on the same throwaway cluster
// in the same run, for pgbench, the mixed dataset, the FK-heavy schema and
// N small tables. It also prints the dumps' times (pg_dump -Fd -j N,
// pg_dump -Fc, pgsprint dump -j N). The machine is shared, so compare the
// ratios of one run, not absolute times across runs.
//
//	go run ./bench/restore --scale 100 -j 2
//	go run ./bench/restore -datasets small -tables 10000 -j 2
//
// The tables show each command's peak RSS twice: getrusage's (the largest
// of the command and its children: for pgsprint dump it is pg_dump's) and
// the command's own (VmHWM). With -clone it also measures pgsprint clone
// of the source; at 100,000 tables the cluster's max_locks_per_transaction
// is raised as pg_dump needs (benchkit.LocksPerTransaction):
//
//	go run ./bench/restore -datasets small -tables 100000 -j 2 -clone
//
// With --table it measures restoring one table (its rows, indexes and
// constraints) out of the full archives instead: pgsprint restore -t
// against pg_restore -L with the table's entries, as a DBA would write it.
//
//	go run ./bench/restore --scale 30 -j 2 --datasets pgbench --table pgbench_accounts
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func main() {
	scale := flag.Int("scale", 100, "pgbench scale")
	mixed := flag.Float64("mixed-scale", 1, "mixed dataset scale (1 is about 1 GB)")
	fk := flag.Float64("fk-scale", 1, "FK-heavy dataset scale (1 is about 2.5 million rows, 600 MB)")
	jobs := flag.Int("j", 2, "parallel jobs for both tools")
	tables := flag.Int("tables", 1000, "tables of the small-tables dataset")
	only := flag.String("datasets", "pgbench,mixed,fk", "comma-separated datasets to run: pgbench, mixed, fk, small")
	binDir := flag.String("bin", "", "PostgreSQL bin directory (default: found like the tests do)")
	table := flag.String("table", "", "measure restoring only this table of schema public, with its indexes and constraints")
	clone := flag.Bool("clone", false, "also measure pgsprint clone -j N from the source database into a fresh one")
	extra := flag.String("extra", "", "also measure pgsprint restore --no-analyze with these extra flags (space-separated), e.g. --split-min-bytes=-1")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	scales := dataset.Scales{Pgbench: *scale, Mixed: *mixed, FK: *fk, Tables: *tables}
	if err := run(ctx, *binDir, *only, *extra, *table, *clone, scales, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "bench/restore:", err)
		os.Exit(1)
	}
}

// bench is one run's cluster, binaries and scratch directory.
type bench struct {
	c        *pgtest.Instance
	bin      string // PostgreSQL bin directory
	pgsprint string
	dir      string
	jobs     int
	extra    []string
	table    string
	clone    bool // also measure pgsprint clone of the source
}

func run(ctx context.Context, binDir, only, extra, table string, clone bool, scales dataset.Scales, jobs int) error {
	bin, err := pgtest.FindBinDir(binDir)
	if err != nil {
		return err
	}
	dir, pgsprint, err := benchkit.WorkDir(ctx, "restore")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{bin: bin, dir: dir, jobs: jobs, pgsprint: pgsprint, extra: strings.Fields(extra), table: table, clone: clone}
	locked := 0 // tables pg_dump locks at once: the lock table must hold them
	if strings.Contains(","+only+",", ",small,") {
		locked = scales.Tables
	}
	if b.c, err = benchkit.StartClusterFor(ctx, bin, locked); err != nil {
		return err
	}
	defer b.c.Close()
	fmt.Printf("# restore benchmark: -j %d, PostgreSQL %d, %d CPUs (ratios are from one run on a shared machine)\n", jobs, b.c.Version(), runtime.NumCPU())
	for _, name := range strings.Split(only, ",") {
		title, build, err := dataset.ByName(ctx, name, bin, scales)
		if err != nil {
			return err
		}
		if err := b.compare(ctx, name, title, build); err != nil {
			return err
		}
	}
	return nil
}

// compare builds one dataset, dumps it with both tools and measures both
// restores into fresh databases, checkpointing before each so that neither
// pays for the other's dirty buffers.
func (b *bench) compare(ctx context.Context, name, title string, build func(string) error) error {
	src := "src_" + name
	if err := b.c.CreateDB(ctx, src); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "building %s...\n", title)
	if err := build(b.c.ConnString(src)); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	j := fmt.Sprint(b.jobs)
	fdir := filepath.Join(b.dir, name+".dir")
	fc := filepath.Join(b.dir, name+".dump")
	file := filepath.Join(b.dir, name+".pgs")
	var dumps []benchkit.Result
	for _, c := range []struct {
		name string
		cmd  benchkit.Command
	}{
		{"pg_dump -Fd -j " + j, benchkit.Cmd(filepath.Join(b.bin, "pg_dump"), "-Fd", "-j", j, "-f", fdir, "-d", b.c.ConnString(src))},
		{"pg_dump -Fc", benchkit.Cmd(filepath.Join(b.bin, "pg_dump"), "-Fc", "-f", fc, "-d", b.c.ConnString(src))},
		{"pgsprint dump -j " + j, benchkit.Cmd(b.pgsprint, "dump", "-q", "-j", j, "-f", file, "-d", b.c.ConnString(src))},
	} {
		if err := b.c.Exec(ctx, "postgres", "CHECKPOINT"); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %s...\n", title, c.name)
		r := benchkit.Run(ctx, c.name, c.cmd, nil)
		if r.Err != nil && strings.HasPrefix(c.name, "pg_dump -Fd") {
			// pg_dump -Fd -j N locks every table in each worker as well
			// as in its leader: at 10,000 tables it can run out of lock
			// slots where -Fc does not. Say so and restore from -Fc.
			fmt.Printf("\n%s failed (%v): pg_restore -j %s reads the -Fc dump instead\n", c.name, r.Err, j)
			os.RemoveAll(fdir)
			fdir = fc
			continue
		}
		if r.Err != nil {
			return r.Err
		}
		dumps = append(dumps, r)
	}
	if fdir != fc {
		os.Remove(fc)
	}
	benchkit.Markdown(os.Stdout, title+": dump", dumps, "pg_dump -Fc")
	var results []benchkit.Result
	report := filepath.Join(b.dir, name+".report")
	type tool struct {
		name string
		cmd  func(db string) benchkit.Command
	}
	tools := []tool{
		{"pg_restore -j " + j, func(db string) benchkit.Command {
			return benchkit.Cmd(filepath.Join(b.bin, "pg_restore"), "-j", j, "-d", b.c.ConnString(db), fdir)
		}},
		{"pg_restore -j " + j + " + vacuumdb -Z -j " + j, func(db string) benchkit.Command {
			return benchkit.Cmd("sh", "-c", `"$0" -j "$1" -d "$2" "$3" && exec "$4" --analyze-only --quiet -j "$1" -d "$2"`,
				filepath.Join(b.bin, "pg_restore"), j, b.c.ConnString(db), fdir, filepath.Join(b.bin, "vacuumdb"))
		}},
		{"pgsprint restore -j " + j + " --no-analyze", func(db string) benchkit.Command {
			return benchkit.Cmd(b.pgsprint, "restore", "-q", "--no-analyze", "-j", j, "-f", file, "-d", b.c.ConnString(db))
		}},
		{"pgsprint restore -j " + j + " (with ANALYZE)", func(db string) benchkit.Command {
			return benchkit.Cmd("sh", "-c", `exec "$0" restore -j "$1" -f "$2" -d "$3" 2>"$4"`, b.pgsprint, j, file, b.c.ConnString(db), report)
		}},
	}
	if b.table != "" {
		list, err := b.tableList(ctx, fdir)
		if err != nil {
			return err
		}
		tools = []tool{
			{"pg_restore -j " + j + " -L (" + b.table + ")", func(db string) benchkit.Command {
				return benchkit.Cmd(filepath.Join(b.bin, "pg_restore"), "-j", j, "-L", list, "-d", b.c.ConnString(db), fdir)
			}},
			{"pgsprint restore -j " + j + " -t " + b.table + " --no-analyze", func(db string) benchkit.Command {
				return benchkit.Cmd(b.pgsprint, "restore", "-q", "--no-analyze", "-j", j, "-t", "public."+b.table, "-f", file, "-d", b.c.ConnString(db))
			}},
			{"pgsprint restore -j " + j + " -t " + b.table + " -f - (from a pipe)", func(db string) benchkit.Command {
				return benchkit.Cmd("sh", "-c", `exec "$0" restore -q --no-analyze -j "$1" -t "public.$2" -f - -d "$3" < "$4"`, b.pgsprint, j, b.table, b.c.ConnString(db), file)
			}},
		}
	}
	if b.clone && b.table == "" {
		// The source straight into the target: a dump and a restore in
		// one run, for its peak RSS beside theirs (and its time).
		tools = append(tools, tool{"pgsprint clone -j " + j, func(db string) benchkit.Command {
			return benchkit.Cmd(b.pgsprint, "clone", "-q", "-j", j, "--source", b.c.ConnString(src), "--target", b.c.ConnString(db))
		}})
	}
	if len(b.extra) > 0 {
		tools = append(tools, tool{"pgsprint restore -j " + j + " --no-analyze " + strings.Join(b.extra, " "), func(db string) benchkit.Command {
			return benchkit.Cmd(append([]string{b.pgsprint, "restore", "-q", "--no-analyze", "-j", j, "-f", file, "-d", b.c.ConnString(db)}, b.extra...)...)
		}})
	}
	for _, tool := range tools {
		db := "dst_" + name
		if err := b.c.CreateDB(ctx, db); err != nil {
			return err
		}
		if err := b.c.Exec(ctx, "postgres", "CHECKPOINT"); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %s...\n", title, tool.name)
		results = append(results, benchkit.Run(ctx, tool.name, tool.cmd(db), nil))
		if err := b.c.Exec(ctx, "postgres", "DROP DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
			return err
		}
	}
	if err := b.c.Exec(ctx, "postgres", "DROP DATABASE "+pgx.Identifier{src}.Sanitize()); err != nil {
		return err
	}
	base := results[0].Name
	if len(results) > 1 && strings.Contains(results[1].Name, "vacuumdb") {
		base = results[1].Name // the fair peer: pgsprint restore analyzes too
	}
	benchkit.Markdown(os.Stdout, title+": restore", results, base)
	if rep, err := os.ReadFile(report); err == nil {
		fmt.Printf("\npgsprint's phase report:\n\n```\n%s```\n", rep)
	}
	return nil
}

// tableList writes a pg_restore list of the archive's entries of table
// public.<b.table>: its definition, data and constraints (pg_dump lists a
// constraint as "public <table> <name>"; pgbench's tables have no other
// indexes).
func (b *bench) tableList(ctx context.Context, fdir string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(b.bin, "pg_restore"), "-l", fdir).Output()
	if err != nil {
		return "", fmt.Errorf("pg_restore -l: %w", err)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, ";") && strings.Contains(l, " public "+b.table+" ") {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return "", fmt.Errorf("no entries of public.%s in the archive", b.table)
	}
	list := filepath.Join(b.dir, b.table+".list")
	return list, os.WriteFile(list, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
}
