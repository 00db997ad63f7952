// Command scale runs seed 000's datasets at the size users bring: pgbench
// -s 1000 (about 12 GiB), as one unpartitioned table and in 30 partitions,
// through every pgsprint path (dump to a file, restore, dump into a pipe
// to restore, clone, dump and restore through s3://) beside the peers
// (pg_dump -Fd -j N, pg_dump -Fc, pg_restore -j N + vacuumdb -Z -j N,
// pgcopydb when installed) and the raw parallel COPY limit. Every command
// runs -rounds times, interleaved, and each row prints min/median/max.
//
// Each row shows wall time, the command's own CPU, the whole machine's CPU
// (the servers' backends included) and how busy it kept the cores, peak
// RSS, bytes written and seconds per GiB; the ratio rows set pgsprint
// beside its peer by wall time and by machine CPU for the same result.
//
//	go run ./bench/scale                        # 12 GiB, both datasets, -j 2
//	go run ./bench/scale -scale 100 -rounds 3   # smaller
//	go run ./bench/scale -dsn 'host=/run/pg port=5432' -keep   # a server of yours
//	go run ./bench/scale -datasets tpch -tpch-sf 1 -trace -out /tmp/r   # where time goes
//
// With -trace, a second connection samples pg_stat_activity every 100 ms
// during each step: the waits and phases (COPY, CREATE INDEX, ADD
// CONSTRAINT, VALIDATE, ANALYZE) that took the backends' time and how
// long fewer backends than -j were busy, under each dataset's table and
// in traces.json.
//
// It checks the disk it needs before it builds anything and refuses
// clearly when the space is not there. The bench pack (make bench-pack)
// runs this program on a machine with nothing installed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgsprint/pgsprint/bench/benchkit"
)

// config is the benchmark's command line.
type config struct {
	scale    int
	mixed    float64 // the mixed dataset's scale (1: about 1 GB)
	tpch     float64 // TPC-H's scale factor
	tables   int     // the tables dataset's table count
	tpchgen  string  // the tpchgen-cli program
	datasets []dataset
	jobs     []int
	rounds   int
	steps    map[string]bool
	verify   string // all, first, none
	dsn      string // an existing server; empty starts a throwaway one
	binDir   string
	pgsprint string // a built pgsprint; empty builds ./cmd/pgsprint
	workDir  string
	out      string // directory of results.md and results.csv
	keep     bool   // keep the source databases (and an -dsn server's) after the run
	trace    traceFlag
	timeout  time.Duration
}

// allSteps are the measured commands -steps chooses from.
var allSteps = []string{"raw", "dump", "pgdump-schema", "pgdump-fd", "pgdump-fc", "restore", "pgrestore", "handmade", "pipe", "clone", "pgcopydb", "s3"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	benchkit.RawCopySubcommand(ctx, os.Args)
	benchkit.HandSubcommand(ctx, os.Args)
	c, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(2)
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var datasets, jobs, steps string
	fs.IntVar(&c.scale, "scale", 1000, "pgbench scale (1000: about 12 GiB, seed 000's size)")
	fs.Float64Var(&c.mixed, "mixed-scale", 10, "the mixed dataset's scale (1: about 1 GB of names, e-mails, text, 10 secondary indexes)")
	fs.Float64Var(&c.tpch, "tpch-sf", 1, "TPC-H's scale factor (1: about 1 GB of rows)")
	fs.IntVar(&c.tables, "tables", 10000, "the tables dataset's table count (five rows each)")
	fs.StringVar(&c.tpchgen, "tpchgen", "tpchgen-cli", "the TPC-H generator (pip install tpchgen-cli)")
	fs.StringVar(&datasets, "datasets", "flat,parts,mixed,tpch,tables", "comma-separated: flat (one pgbench_accounts table), parts (30 partitions), mixed (three tables of text), tpch (TPC-H), tables (-tables small tables: dump against pg_dump --schema-only)")
	fs.StringVar(&jobs, "j", "2", "comma-separated -j values; each runs every step")
	fs.IntVar(&c.rounds, "rounds", 3, "run every step this many times, interleaved (min/median/max)")
	fs.StringVar(&steps, "steps", strings.Join(allSteps, ","), "comma-separated steps: "+strings.Join(allSteps, ", "))
	fs.StringVar(&c.verify, "verify", "first", "compare every restored database with its source: all (every round), first (the first round of the first -j), none")
	fs.StringVar(&c.dsn, "dsn", "", "an existing server (keyword string; password from PGPASSWORD or .pgpass): datasets are built there once and reused; default: a throwaway cluster")
	fs.StringVar(&c.binDir, "bin", "", "PostgreSQL bin directory (default: as the tests find it)")
	fs.StringVar(&c.pgsprint, "pgsprint", "", "the pgsprint binary to measure (default: go build ./cmd/pgsprint)")
	fs.StringVar(&c.workDir, "work-dir", "", "where archives are written (default: a temporary directory)")
	fs.StringVar(&c.out, "out", "", "directory for results.md and results.csv (default: the work directory)")
	fs.BoolVar(&c.keep, "keep", false, "keep the source databases after the run, for the next one")
	fs.Var(&c.trace, "trace", "sample pg_stat_activity every 100 ms during every step (wait events, phases, busy backends): -trace for every dataset, -trace=mixed,tpch for those; raw samples go to trace-*.csv beside the results with -out, -work-dir or -keep")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Hour, "limit for any one command")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.scale < 1 || c.rounds < 1 || c.tables < 1 {
		return c, fmt.Errorf("-scale, -rounds and -tables must be at least 1")
	}
	if !(c.mixed > 0) || !(c.tpch > 0) {
		return c, fmt.Errorf("-mixed-scale and -tpch-sf must be above 0")
	}
	for _, name := range splitList(datasets) {
		d, ok := datasetNamed(name, c)
		if !ok {
			return c, fmt.Errorf("unknown dataset %q (%s)", name, datasetNames)
		}
		c.datasets = append(c.datasets, d)
	}
	for _, j := range splitList(jobs) {
		n, err := strconv.Atoi(j)
		if err != nil || n < 1 {
			return c, fmt.Errorf("bad -j %q", jobs)
		}
		c.jobs = append(c.jobs, n)
	}
	c.steps = map[string]bool{}
	for _, s := range splitList(steps) {
		if !slices.Contains(allSteps, s) {
			return c, fmt.Errorf("unknown step %q (%s)", s, strings.Join(allSteps, ", "))
		}
		c.steps[s] = true
	}
	if c.verify != "all" && c.verify != "first" && c.verify != "none" {
		return c, fmt.Errorf("-verify is all, first or none")
	}
	if len(c.datasets) == 0 || len(c.jobs) == 0 {
		return c, fmt.Errorf("nothing to run")
	}
	return c, nil
}

func run(ctx context.Context, c config) error {
	env, err := setUp(ctx, c)
	if err != nil {
		return err
	}
	defer env.close()
	labels := make([]string, len(c.datasets))
	for i, d := range c.datasets {
		labels[i] = d.label
	}
	fmt.Printf("# pgsprint at scale: %s\n\n%s; %s; -j %s; %d rounds, interleaved; started %s\n",
		strings.Join(labels, "; "), machineLine(), env.srv.Version(ctx), joinInts(c.jobs), c.rounds, time.Now().UTC().Format(time.RFC3339))
	var all []*row
	for _, d := range c.datasets {
		src, err := env.prepare(ctx, d)
		if err != nil {
			return err
		}
		rows, err := env.measure(ctx, src)
		if len(rows) > 0 {
			printTable(os.Stdout, src, rows)
			all = append(all, rows...)
			// After each dataset, and when a run is cut short (a lent
			// machine's time runs out): the steps measured are kept.
			if werr := writeResults(c.out, all); werr != nil {
				return errors.Join(err, werr)
			}
		}
		if err != nil {
			return err
		}
		if err := env.finish(ctx, src); err != nil {
			return err
		}
	}
	return nil
}

func machineLine() string {
	return fmt.Sprintf("%d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
