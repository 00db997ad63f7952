// Command server benchmarks copying a whole server: `pgsprint dump --all`
// then `pgsprint restore --all` at -j N (through a file, and through a
// pipe), against `pg_dumpall | psql`, and
// against the usual script (pg_dumpall --globals-only, then per database
// pg_dump -Fd -j N and pg_restore --create -j N), in one run. The source
// holds one pgbench database and ten small ones (five FK-heavy, five of
// many small tables); each tool restores into a fresh cluster. The machine
// is shared, so compare the ratios of one run, not absolute times across
// runs.
//
//	go run ./bench/server --scale 30 -j 2 > server.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func main() {
	scale := flag.Int("scale", 30, "pgbench scale of the big database")
	small := flag.Float64("small-scale", 0.02, "scale of each of the ten small databases (FK-heavy and many-tables datasets)")
	jobs := flag.Int("j", 2, "parallel jobs for every tool")
	binDir := flag.String("bin", "", "PostgreSQL bin directory (default: found like the tests do)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *binDir, *scale, *small, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "bench/server:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, binDir string, scale int, small float64, jobs int) error {
	bin, err := pgtest.FindBinDir(binDir)
	if err != nil {
		return err
	}
	dir, pgsprint, err := benchkit.WorkDir(ctx, "server")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src, err := benchkit.StartCluster(ctx, bin)
	if err != nil {
		return err
	}
	defer src.Close()
	dbs, err := build(ctx, src, bin, scale, small)
	if err != nil {
		return err
	}
	fmt.Printf("# whole-server benchmark: pgbench -s %d + 10 small databases (scale %g), -j %d, PostgreSQL %d, %d CPUs (ratios are from one run on a shared machine)\n",
		scale, small, jobs, src.Version(), runtime.NumCPU())
	j := fmt.Sprint(jobs)
	tool := func(name string) string { return filepath.Join(bin, name) }
	file := filepath.Join(dir, "server.pgs")
	globals := filepath.Join(dir, "globals.sql")

	// Each way: its dump (nil: none), then its restore into a fresh
	// cluster, whose connection string (to postgres) it is given.
	type way struct {
		name    string
		dump    func() benchkit.Command
		restore func(target string) benchkit.Command
	}
	perDB := func(format string) string {
		var b strings.Builder
		for _, db := range dbs {
			fmt.Fprintf(&b, format, db, db, db)
		}
		return b.String()
	}
	ways := []way{
		{"pg_dumpall piped into psql", nil, func(target string) benchkit.Command {
			return benchkit.Cmd("sh", "-c", `"$0" -d "$1" | "$2" -X -q -d "$3" >/dev/null 2>&1`, tool("pg_dumpall"), src.ConnString("postgres"), tool("psql"), target)
		}},
		{"pg_dumpall -g + pg_dump -Fd -j " + j + " / pg_restore -C -j " + j, func() benchkit.Command {
			return benchkit.Cmd("sh", "-ec", `"$0" -g -d "$1" > "$2"`+perDB("\n\"$3\" -Fd -j $5 -f \"$4/%s.dir\" -d \"$(printf %%s \"$1\" | sed 's/dbname=postgres/dbname=%s/')\" # %s"),
				tool("pg_dumpall"), src.ConnString("postgres"), globals, tool("pg_dump"), dir, j)
		}, func(target string) benchkit.Command {
			return benchkit.Cmd("sh", "-ec", `"$0" -X -q -d "$1" -f "$2" >/dev/null 2>&1`+perDB("\n\"$3\" -C -j $5 -d \"$1\" \"$4/%s.dir\" # %s %s"),
				tool("psql"), target, globals, tool("pg_restore"), dir, j)
		}},
		{"pgsprint dump --all / restore --all -j " + j, func() benchkit.Command {
			return benchkit.Cmd(pgsprint, "dump", "--all", "-q", "-j", j, "-f", file, "-d", src.ConnString("postgres"))
		}, func(target string) benchkit.Command {
			return benchkit.Cmd(pgsprint, "restore", "--all", "-q", "-j", j, "-f", file, "-d", target)
		}},
		// The like-for-like of pg_dumpall | psql: no file (restore --all
		// spools the archive in its spill directory, then restores).
		{"pgsprint dump --all -f - piped into restore --all -f - -j " + j, nil, func(target string) benchkit.Command {
			return benchkit.Cmd("bash", "-o", "pipefail", "-c", `"$0" dump --all -q -j "$1" -f - -d "$2" | "$0" restore --all -q -j "$1" -f - -d "$3"`,
				pgsprint, j, src.ConnString("postgres"), target)
		}},
	}
	var results []benchkit.Result
	for _, w := range ways {
		total := benchkit.Result{Name: w.name + ": total"}
		if w.dump != nil {
			fmt.Fprintf(os.Stderr, "%s: dump...\n", w.name)
			r := benchkit.Run(ctx, w.name+": dump", w.dump(), nil)
			if r.Err != nil {
				return r.Err
			}
			total = total.Plus(r)
			results = append(results, r)
		}
		dst, err := benchkit.StartCluster(ctx, bin)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: restore...\n", w.name)
		r := benchkit.Run(ctx, w.name+": restore", w.restore(dst.ConnString("postgres")), nil)
		dst.Close()
		if r.Err != nil {
			return r.Err
		}
		results = append(results, r, total.Plus(r))
	}
	benchkit.Markdown(os.Stdout, "whole server", results, results[0].Name)
	return nil
}

// build creates the source's databases: bench (pgbench), fk1..fk5 and
// many1..many5. It returns their names.
func build(ctx context.Context, c *pgtest.Instance, bin string, scale int, small float64) ([]string, error) {
	fmt.Fprintf(os.Stderr, "building pgbench -s %d and ten small databases...\n", scale)
	dbs := []string{"bench"}
	for i := 1; i <= 5; i++ {
		dbs = append(dbs, fmt.Sprintf("fk%d", i), fmt.Sprintf("many%d", i))
	}
	for _, db := range dbs {
		if err := c.CreateDB(ctx, db); err != nil {
			return nil, err
		}
		var err error
		switch {
		case db == "bench":
			err = dataset.Pgbench(ctx, bin, c.ConnString(db), scale, 0)
		case strings.HasPrefix(db, "fk"):
			err = dataset.FKHeavy(ctx, c.ConnString(db), small)
		default:
			err = dataset.Many(ctx, c.ConnString(db), small)
		}
		if err != nil {
			return nil, fmt.Errorf("build %s: %w", db, err)
		}
	}
	return dbs, nil
}
