// Command dump benchmarks pgsprint dump against pg_dump and against the
// raw limit (the same chunks copied to /dev/null) on pgbench datasets, in
// one run on one throwaway cluster, and prints Markdown tables.
//
//	go run ./bench/dump --scale 100
//
// Ratios are only meaningful within one run: the machine is shared.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
)

// baseline is the row every speed ratio is taken against.
const baseline = "pg_dump -Fd -j2"

// config is the benchmark's command line.
type config struct {
	scale      int
	partitions int
	jobs       []int
	rssJobs    int
	codecs     []string
	purego     bool
	binDir     string
	workDir    string
	chunkSize  int64
	rounds     int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	benchkit.RawCopySubcommand(ctx, os.Args)
	var c config
	var jobs, codecs string
	flag.IntVar(&c.scale, "scale", 100, "pgbench scale factor (100: one 1.3 GB table)")
	flag.IntVar(&c.partitions, "partitions", 30, "partitions of the second dataset (0: skip it)")
	flag.StringVar(&jobs, "jobs", "2,4", "pgsprint dump and raw-limit worker counts")
	flag.IntVar(&c.rssJobs, "rss-jobs", 8, "also run pgsprint with this many workers, for peak RSS (0: skip)")
	flag.StringVar(&codecs, "codecs", "zstd:3,lz4", "extra pgsprint -j2 runs with these -Z specs, for the codec choice")
	flag.BoolVar(&c.purego, "purego", true, "also run a pure Go build (CGO_ENABLED=0) of pgsprint -j2")
	flag.StringVar(&c.binDir, "bin-dir", "", "PostgreSQL bin directory (default: as the tests find it)")
	flag.StringVar(&c.workDir, "work-dir", "", "where archives are written (default: a temporary directory)")
	flag.Int64Var(&c.chunkSize, "chunk-size", chunk.DefaultSize, "pgsprint --chunk-size in bytes")
	flag.IntVar(&c.rounds, "rounds", 2, "run every command this many times, interleaved, and keep the fastest (the machine is shared)")
	flag.Parse()
	for _, j := range strings.Split(jobs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(j))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bad --jobs %q\n", jobs)
			os.Exit(2)
		}
		c.jobs = append(c.jobs, n)
	}
	if codecs != "" {
		c.codecs = strings.Split(codecs, ",")
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/dump:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	if c.workDir == "" {
		d, err := os.MkdirTemp("", "pgsprint-bench-dump-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		c.workDir = d
	}
	bins, err := buildBinaries(ctx, c)
	if err != nil {
		return err
	}
	cl, err := benchkit.StartCluster(ctx, c.binDir)
	if err != nil {
		return err
	}
	defer cl.Close()
	fmt.Printf("# pgsprint dump benchmark\n\nscale %d, %s, zstd engine of the default build: %s, --chunk-size %d MiB, started %s\n",
		c.scale, pgVersion(ctx, cl.BinDir()), codec.ZstdEngine, c.chunkSize>>20, time.Now().Format(time.RFC3339))

	datasets := []struct {
		name       string
		partitions int
	}{{"pgbench", 0}}
	if c.partitions > 0 {
		datasets = append(datasets, struct {
			name       string
			partitions int
		}{fmt.Sprintf("pgbench_p%d", c.partitions), c.partitions})
	}
	for _, ds := range datasets {
		if err := cl.CreateDB(ctx, ds.name); err != nil {
			return err
		}
		start := time.Now()
		if err := dataset.Pgbench(ctx, cl.BinDir(), cl.ConnString(ds.name), c.scale, ds.partitions); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "built %s in %s\n", ds.name, time.Since(start).Round(time.Second))
		b := &bench{cfg: c, bins: bins, cluster: cl, db: ds.name}
		if err := b.runAll(ctx); err != nil {
			return err
		}
		title := fmt.Sprintf("pgbench -i -s %d", c.scale)
		if ds.partitions > 0 {
			title += fmt.Sprintf(" --partitions=%d", ds.partitions)
		}
		benchkit.Markdown(os.Stdout, title, b.results, baseline)
		b.printTargets(os.Stdout)
	}
	return nil
}

// binaries are the programs the benchmark runs: pgsprint as users build
// it, pgsprint without cgo, and this program itself for the raw limit.
type binaries struct {
	pgsprint, pgsprintPureGo, self string
}

func buildBinaries(ctx context.Context, c config) (binaries, error) {
	b := binaries{pgsprint: filepath.Join(c.workDir, "pgsprint")}
	build := func(out string, env []string, args ...string) error {
		cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %v: %v: %s", args, err, o)
		}
		return nil
	}
	if err := build(b.pgsprint, nil, "github.com/pgsprint/pgsprint/cmd/pgsprint"); err != nil {
		return b, err
	}
	if c.purego {
		b.pgsprintPureGo = filepath.Join(c.workDir, "pgsprint-purego")
		if err := build(b.pgsprintPureGo, []string{"CGO_ENABLED=0"}, "-tags", "pgsprint_purego", "github.com/pgsprint/pgsprint/cmd/pgsprint"); err != nil {
			return b, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return b, err
	}
	b.self = self
	return b, nil
}

func pgVersion(ctx context.Context, binDir string) string {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "PostgreSQL ?"
	}
	return strings.TrimSpace(string(out))
}
