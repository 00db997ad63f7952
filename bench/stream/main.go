// Command stream benchmarks moving a database without a file in between,
// on one throwaway cluster in one run, for pgbench and the mixed dataset:
//
//   - clone: `pgsprint clone -j N` (binary COPY where it can, and with
//     --text-copy) vs `pgcopydb clone --table-jobs N
//     --index-jobs N --split-tables-larger-than 100MB` vs `pg_dump | psql`;
//   - pipe: `pgsprint dump -f - | pgsprint restore -f -` vs dump to a file
//     then restore from it;
//   - memory: peak RSS of pgsprint clone and of both pipe sides at -j 8
//     (--rss-jobs), on the first dataset.
//
// Every process's wall time, CPU and peak RSS is reported. The machine is
// shared, so compare the ratios of one run, and read the load averages
// printed with it.
//
//	go run ./bench/stream --scale 100 -j 2 --rounds 2
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
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
	jobs := flag.Int("j", 2, "parallel jobs for every tool")
	rounds := flag.Int("rounds", 1, "run every tool this many times, interleaved, and keep the fastest")
	rssJobs := flag.Int("rss-jobs", 8, "also measure pgsprint's peak RSS at this -j on the first dataset (0: skip)")
	only := flag.String("datasets", "pgbench,mixed", "comma-separated datasets to run")
	binDir := flag.String("bin", "", "PostgreSQL bin directory (default: found like the tests do)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *binDir, *only, *scale, *mixed, *jobs, *rssJobs, max(*rounds, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "bench/stream:", err)
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
	rounds   int
}

func run(ctx context.Context, binDir, only string, scale int, mixed float64, jobs, rssJobs, rounds int) error {
	bin, err := pgtest.FindBinDir(binDir)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("pgcopydb"); err != nil {
		return fmt.Errorf("pgcopydb not found: apt-get install pgcopydb")
	}
	dir, pgsprint, err := benchkit.WorkDir(ctx, "stream")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{bin: bin, dir: dir, jobs: jobs, rounds: rounds, pgsprint: pgsprint}
	if b.c, err = benchkit.StartCluster(ctx, bin); err != nil {
		return err
	}
	defer b.c.Close()
	fmt.Printf("# streaming benchmark: -j %d, PostgreSQL %d, %d CPUs, load average at start %s\n",
		jobs, b.c.Version(), runtime.NumCPU(), loadavg())
	fmt.Println("(ratios are from one run on a shared machine)")
	for i, name := range strings.Split(only, ",") {
		title, build, err := dataset.ByName(ctx, name, bin, dataset.Scales{Pgbench: scale, Mixed: mixed, FK: 0})
		if err != nil {
			return err
		}
		rss := 0
		if i == 0 {
			rss = rssJobs
		}
		if err := b.compare(ctx, name, title, build, rss); err != nil {
			return err
		}
	}
	fmt.Printf("\nload average at the end: %s\n", loadavg())
	return nil
}

// loadavg is /proc/loadavg's first three fields: how busy the shared
// machine was.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// uri renders a database of the cluster as a URI over its unix socket, the
// form pgcopydb requires.
func (b *bench) uri(db string) string {
	q := url.Values{"host": {b.c.SocketDir()}, "port": {fmt.Sprint(b.c.Port())}, "user": {pgtest.SuperuserName}}
	return "postgresql:///" + url.PathEscape(db) + "?" + q.Encode()
}

// compare builds one dataset and measures every tool into a fresh target,
// checkpointing before each run so that none pays for another's dirty
// buffers.
func (b *bench) compare(ctx context.Context, name, title string, build func(string) error, rssJobs int) error {
	src := "src_" + name
	if err := b.c.CreateDB(ctx, src); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "building %s...\n", title)
	if err := build(b.c.ConnString(src)); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	j := fmt.Sprint(b.jobs)
	srcConn := b.c.ConnString(src)
	pathEnv := "PATH=" + b.bin + string(os.PathListSeparator) + os.Getenv("PATH")
	file := filepath.Join(b.dir, name+".pgs")
	report := filepath.Join(b.dir, name+".clone-report")

	var clone, pipe, rss []benchkit.Result
	steps := []step{
		{&clone, "pgsprint clone -j " + j, func(dst string) []benchkit.Result {
			// Through sh only to keep the phase report: exec replaces the
			// shell, so the measured process is pgsprint.
			return one(benchkit.Run(ctx, "pgsprint clone -j "+j, benchkit.Cmd("sh", "-c", `exec "$0" clone -j "$1" --source "$2" --target "$3" 2>"$4"`,
				b.pgsprint, j, srcConn, b.c.ConnString(dst), report), nil))
		}},
		{&clone, "pgsprint clone --text-copy", func(dst string) []benchkit.Result {
			return one(benchkit.Run(ctx, "pgsprint clone -j "+j+" --text-copy", benchkit.Cmd(b.pgsprint, "clone", "-q", "--text-copy", "-j", j,
				"--source", srcConn, "--target", b.c.ConnString(dst)), nil))
		}},
		{&clone, "pgcopydb clone", func(dst string) []benchkit.Result {
			work := filepath.Join(b.dir, "pgcopydb-"+dst)
			defer os.RemoveAll(work)
			cmd := benchkit.Command{Args: []string{"pgcopydb", "clone", "--table-jobs", j, "--index-jobs", j,
				"--split-tables-larger-than", "100MB", "--dir", work, "--source", b.uri(src), "--target", b.uri(dst)},
				Env: []string{pathEnv}}
			return one(benchkit.Run(ctx, fmt.Sprintf("pgcopydb clone --table-jobs %s --index-jobs %s", j, j), cmd, nil))
		}},
		{&clone, "pg_dump \\| psql", func(dst string) []benchkit.Result {
			w, r1, r2 := benchkit.Pipeline(ctx, "pg_dump \\| psql",
				benchkit.Cmd(filepath.Join(b.bin, "pg_dump"), "-d", srcConn),
				benchkit.Cmd(filepath.Join(b.bin, "psql"), "-q", "-X", "-v", "ON_ERROR_STOP=1", "-o", "/dev/null", "-d", b.c.ConnString(dst)))
			return []benchkit.Result{w, r1, r2}
		}},
		{&pipe, "pgsprint dump -f - | pgsprint restore -f -", func(dst string) []benchkit.Result {
			return b.pipeRun(ctx, "pgsprint dump -f - \\| pgsprint restore -f - (-j "+j+")", j, srcConn, dst)
		}},
		{&pipe, "dump to a file, then restore", func(dst string) []benchkit.Result {
			d := benchkit.Run(ctx, "pgsprint dump -f FILE", benchkit.Cmd(b.pgsprint, "dump", "-q", "-j", j, "-f", file, "-d", srcConn), nil)
			if st, err := os.Stat(file); err == nil {
				d.Size = st.Size()
			}
			r := benchkit.Run(ctx, "pgsprint restore -f FILE", benchkit.Cmd(b.pgsprint, "restore", "-q", "-j", j, "-f", file, "-d", b.c.ConnString(dst)), nil)
			os.Remove(file)
			total := d.Plus(r)
			total.Name, total.OwnRSS = "dump to a file, then restore (-j "+j+")", 0
			if d.Err != nil {
				total.Err = d.Err
			} else if r.Err != nil {
				total.Err = r.Err
			}
			return []benchkit.Result{total, d, r}
		}},
	}
	if rssJobs > 0 {
		rj := fmt.Sprint(rssJobs)
		steps = append(steps, struct {
			group *[]benchkit.Result
			name  string
			run   func(dst string) []benchkit.Result
		}{&rss, "pgsprint clone -j " + rj, func(dst string) []benchkit.Result {
			return one(benchkit.Run(ctx, "pgsprint clone -j "+rj, benchkit.Cmd(b.pgsprint, "clone", "-q", "-j", rj,
				"--source", srcConn, "--target", b.c.ConnString(dst)), nil))
		}}, struct {
			group *[]benchkit.Result
			name  string
			run   func(dst string) []benchkit.Result
		}{&rss, "pipe -j " + rj, func(dst string) []benchkit.Result {
			return b.pipeRun(ctx, "pgsprint dump -f - \\| pgsprint restore -f - (-j "+rj+")", rj, srcConn, dst)
		}})
	}
	// Rounds interleave the tools, so that a burst of load from the
	// machine's other users hits all of them alike; the fastest run of
	// each is kept and every run's wall time is printed.
	best := make([][]benchkit.Result, len(steps))
	walls := make([][]string, len(steps))
	for round := range b.rounds {
		for i, s := range steps {
			if round > 0 && s.group == &rss {
				continue // memory is measured once
			}
			dst := "dst_" + name
			if err := b.c.CreateDB(ctx, dst); err != nil {
				return err
			}
			if err := b.c.Exec(ctx, "postgres", "CHECKPOINT"); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s: %s, round %d (load %s)...\n", title, s.name, round+1, loadavg())
			res := s.run(dst)
			fmt.Fprintf(os.Stderr, "  %.1f s\n", res[0].Wall.Seconds())
			walls[i] = append(walls[i], fmt.Sprintf("%.1f", res[0].Wall.Seconds()))
			if best[i] == nil || (res[0].Err == nil && (best[i][0].Err != nil || res[0].Wall < best[i][0].Wall)) {
				best[i] = res
			}
			if err := b.c.Exec(ctx, "postgres", "DROP DATABASE "+pgx.Identifier{dst}.Sanitize()); err != nil {
				return err
			}
		}
	}
	for i, s := range steps {
		*s.group = append(*s.group, best[i]...)
	}
	if b.rounds > 1 {
		fmt.Printf("\n%s, wall s of every round:\n\n", title)
		for i, s := range steps {
			fmt.Printf("- %s: %s\n", s.name, strings.Join(walls[i], ", "))
		}
	}
	benchkit.Markdown(os.Stdout, title+": clone", clone, clone[1].Name)
	benchkit.Markdown(os.Stdout, title+": pipe vs file", pipe, pipe[len(pipe)-3].Name)
	if len(rss) > 0 {
		benchkit.Markdown(os.Stdout, title+": peak RSS at -j "+fmt.Sprint(rssJobs), rss, rss[0].Name)
	}
	if rep, err := os.ReadFile(report); err == nil {
		fmt.Printf("\npgsprint clone -j %s phase report:\n\n```\n%s```\n", j, rep)
	}
	return b.c.Exec(ctx, "postgres", "DROP DATABASE "+pgx.Identifier{src}.Sanitize())
}

// step is one measured way of copying the dataset into dst; its results
// go to group's table.
type step struct {
	group *[]benchkit.Result
	name  string
	run   func(dst string) []benchkit.Result
}

// pipeRun measures dump -f - | restore -f -, each side on its own.
func (b *bench) pipeRun(ctx context.Context, name, j, srcConn, dst string) []benchkit.Result {
	w, r1, r2 := benchkit.Pipeline(ctx, name,
		benchkit.Cmd(b.pgsprint, "dump", "-q", "-j", j, "-f", "-", "-d", srcConn),
		benchkit.Cmd(b.pgsprint, "restore", "-q", "-j", j, "-f", "-", "--spill-dir", b.dir, "-d", b.c.ConnString(dst)))
	return []benchkit.Result{w, r1, r2}
}

func one(r benchkit.Result) []benchkit.Result { return []benchkit.Result{r} }
