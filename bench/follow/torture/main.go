// Command torture runs pgsprint's cutover (clone --follow, follow finish,
// follow abort) round after round under writes, random DDL, prepared
// transactions, kill -9 and racing finishes, and apply workers made to
// fail, and checks after each round that no acknowledged write was lost
// and nothing of pgsprint was left behind (docs/RELIABILITY.md,
// "Following": the torture run).
//
//	go run ./bench/follow/torture -rounds 200 -seed N
//
// Every invariant break prints the seed, the round and one line; the last
// line counts rounds, kills, races, apply failures and breaks. It exits
// 1 on any break, 2 when the run itself could not go on. A round is
// replayed with -seed N -first ROUND -rounds 1 (the writers' timing is
// not).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// config is one run's settings.
type config struct {
	rounds   int
	first    int
	seed     uint64
	pgsprint string // the binary; empty: built from this module
	binDir   string // PostgreSQL's bin directory; empty: pgctl's choice
	dir      string // where the clusters' directories go
	verbose  bool
	out      io.Writer
}

// stats is what the final line counts.
type stats struct {
	rounds, kills, races, applyFailures, lateSessions, breaks int
}

func (s stats) String() string {
	return fmt.Sprintf("torture: %d rounds, %d kills, %d races, %d apply failures, %d sessions starting across the fence, %d invariant breaks",
		s.rounds, s.kills, s.races, s.applyFailures, s.lateSessions, s.breaks)
}

func main() {
	var c config
	flag.IntVar(&c.rounds, "rounds", 20, "rounds to run")
	flag.IntVar(&c.first, "first", 1, "number of the first round (with -seed, replays from that round)")
	flag.Uint64Var(&c.seed, "seed", 0, "random seed (0: from the clock)")
	flag.StringVar(&c.pgsprint, "pgsprint", "", "pgsprint binary (default: built from this module)")
	flag.StringVar(&c.binDir, "pg-bin", "", "PostgreSQL bin directory (default: as the tests pick it)")
	flag.StringVar(&c.dir, "dir", os.Getenv("PGSPRINT_TEST_DIR"), "directory for the clusters (default $TMPDIR)")
	flag.BoolVar(&c.verbose, "v", false, "say what each round does")
	flag.Parse()
	if flag.NArg() > 0 || c.rounds < 1 || c.first < 1 {
		fmt.Fprintln(os.Stderr, "torture: usage: torture [-rounds N] [-seed S] [-first R] [-pgsprint BIN] [-pg-bin DIR] [-v]")
		os.Exit(2)
	}
	if c.seed == 0 {
		c.seed = uint64(time.Now().UnixNano())
	}
	c.out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := run(ctx, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "torture: %v\n", err)
	}
	fmt.Println(st)
	if err != nil {
		os.Exit(2)
	}
	if st.breaks > 0 {
		os.Exit(1)
	}
}

// torture is one run: the source and target clusters every round reuses,
// each round in databases of its own.
type torture struct {
	cfg      config
	src, dst *pgctl.Instance
	bin      string
	// stall is finish's --stall-timeout flag when the binary has it.
	stall bool
	stats
}

// run prints the seed, starts the clusters and runs the rounds; err is
// a failure of the run itself (a cluster that does not start, a round
// whose leftovers cannot be removed), not an invariant break.
func run(ctx context.Context, c config) (stats, error) {
	fmt.Fprintf(c.out, "torture: seed %d (replay: go run ./bench/follow/torture -seed %d -rounds %d -first %d)\n", c.seed, c.seed, c.rounds, c.first)
	t := &torture{cfg: c}
	work, err := os.MkdirTemp("", "pgsprint-torture-")
	if err != nil {
		return t.stats, err
	}
	defer os.RemoveAll(work)
	t.bin = c.pgsprint
	if t.bin == "" {
		t.bin = filepath.Join(work, "pgsprint")
		build := exec.CommandContext(ctx, "go", "build", "-o", t.bin, "github.com/pgsprint/pgsprint/cmd/pgsprint")
		if out, err := build.CombinedOutput(); err != nil {
			return t.stats, fmt.Errorf("build pgsprint: %v\n%s", err, out)
		}
	}
	help, _ := exec.CommandContext(ctx, t.bin, "follow", "finish", "--help").Output()
	t.stall = strings.Contains(string(help), "--stall-timeout")
	if t.src, err = pgctl.Start(ctx, pgctl.Options{BinDir: c.binDir, Dir: c.dir, Settings: map[string]string{
		"wal_level": "logical", "max_replication_slots": "20", "max_wal_senders": "20",
		"max_prepared_transactions": "10", "synchronous_commit": "on"}}); err != nil {
		return t.stats, err
	}
	defer t.src.Close()
	if t.dst, err = pgctl.Start(ctx, pgctl.Options{BinDir: c.binDir, Dir: c.dir, Settings: map[string]string{
		"wal_retrieve_retry_interval": "200ms", "logging_collector": "on"}}); err != nil {
		return t.stats, err
	}
	defer t.dst.Close()
	if err := t.src.Exec(ctx, "postgres", "CREATE DATABASE torture_base"); err != nil {
		return t.stats, err
	}
	if err := t.src.Exec(ctx, "torture_base", baseSchema); err != nil {
		return t.stats, fmt.Errorf("base schema: %w", err)
	}
	fmt.Fprintf(c.out, "torture: source PostgreSQL %d, target %d, pgsprint %s, stall timeout flag: %v\n", t.src.Version(), t.dst.Version(), t.bin, t.stall)
	for n := c.first; n < c.first+c.rounds; n++ {
		if ctx.Err() != nil {
			return t.stats, errors.New("interrupted")
		}
		r := newRound(t, n)
		began := time.Now()
		r.run(ctx)
		t.rounds++
		if c.verbose {
			fmt.Fprintf(c.out, "round %d: %s in %s\n", n, r.summary(), time.Since(began).Round(100*time.Millisecond))
		}
		if err := r.cleanup(ctx); err != nil {
			return t.stats, fmt.Errorf("round %d: cleanup: %w", n, err)
		}
	}
	return t.stats, nil
}
