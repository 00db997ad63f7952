// Command crypt measures what encryption costs: pgsprint dump and restore
// of one pgbench database, clear and encrypted (age X25519 recipient,
// AES-256-GCM frames), alternated in the same run on the same throwaway
// cluster, with every restore checked against the source's row hashes.
// The bar: encryption costs at most 10% of wall time at -j 2.
//
//	go run ./bench/crypt --scale 30 -j 2 --rounds 3
//
// Ratios are only meaningful within one run: the machine is shared.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"time"

	"filippo.io/age"
	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func main() {
	scale := flag.Int("scale", 30, "pgbench scale")
	jobs := flag.Int("j", 2, "dump workers and restore connections")
	rounds := flag.Int("rounds", 3, "runs of each variant, alternated; the best wall time counts")
	binDir := flag.String("bin", "", "PostgreSQL bin directory (default: found like the tests do)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *binDir, *scale, *jobs, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "bench/crypt:", err)
		os.Exit(1)
	}
}

// variant is one way of dumping and restoring: clear or encrypted.
type variant struct {
	name    string
	dumpArg []string // added to dump
	readArg []string // added to restore
}

func run(ctx context.Context, binDir string, scale, jobs, rounds int) error {
	bin, err := pgtest.FindBinDir(binDir)
	if err != nil {
		return err
	}
	dir, pgsprint, err := benchkit.WorkDir(ctx, "crypt")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c, err := benchkit.StartCluster(ctx, bin)
	if err != nil {
		return err
	}
	defer c.Close()

	id, err := age.GenerateX25519Identity()
	if err != nil {
		return err
	}
	keyFile := filepath.Join(dir, "key.txt")
	if err := os.WriteFile(keyFile, []byte(id.String()+"\n"), 0o600); err != nil {
		return err
	}
	variants := []variant{
		{name: "clear"},
		{name: "encrypted", dumpArg: []string{"--encrypt-to", id.Recipient().String()}, readArg: []string{"--identity", keyFile}},
	}

	const src = "src_pgbench"
	if err := c.CreateDB(ctx, src); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "building pgbench scale %d...\n", scale)
	if err := dataset.Pgbench(ctx, bin, c.ConnString(src), scale, 0); err != nil {
		return err
	}
	want, err := compare.Fingerprint(ctx, c.ConnString(src))
	if err != nil {
		return err
	}

	j := fmt.Sprint(jobs)
	best := map[string]benchkit.Result{}
	keep := func(r benchkit.Result) {
		if b, ok := best[r.Name]; !ok || r.Wall < b.Wall {
			best[r.Name] = r
		}
	}
	for round := 0; round < rounds; round++ {
		for _, v := range variants {
			file := filepath.Join(dir, v.name+".pgs")
			fmt.Fprintf(os.Stderr, "round %d: %s dump...\n", round+1, v.name)
			d := benchkit.Run(ctx, "dump -j "+j+" ("+v.name+")",
				benchkit.Cmd(append([]string{pgsprint, "dump", "-q", "-j", j, "-f", file, "-d", c.ConnString(src)}, v.dumpArg...)...), nil)
			if d.Err != nil {
				return d.Err
			}
			if st, err := os.Stat(file); err == nil {
				d.Size = st.Size()
			}
			keep(d)

			db := "dst_" + v.name
			if err := c.CreateDB(ctx, db); err != nil {
				return err
			}
			if err := c.Exec(ctx, "postgres", "CHECKPOINT"); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "round %d: %s restore...\n", round+1, v.name)
			r := benchkit.Run(ctx, "restore -j "+j+" --no-analyze ("+v.name+")",
				benchkit.Cmd(append([]string{pgsprint, "restore", "-q", "--no-analyze", "-j", j, "-f", file, "-d", c.ConnString(db)}, v.readArg...)...), nil)
			if r.Err != nil {
				return r.Err
			}
			keep(r)
			got, err := compare.Fingerprint(ctx, c.ConnString(db))
			if err != nil {
				return err
			}
			if diff := compare.FingerprintDiff(want, got); len(diff) > 0 {
				return fmt.Errorf("%s restore differs from the source: %v", v.name, diff)
			}
			if err := c.Exec(ctx, "postgres", "DROP DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
				return err
			}
		}
	}

	fmt.Printf("# encryption benchmark: pgbench scale %d, -j %d, best of %d, PostgreSQL %d, %d CPUs, %s\n",
		scale, jobs, rounds, c.Version(), runtime.NumCPU(), time.Now().Format(time.DateOnly))
	for _, step := range []string{"dump -j " + j, "restore -j " + j + " --no-analyze"} {
		base := step + " (clear)"
		benchkit.Markdown(os.Stdout, step, []benchkit.Result{best[base], best[step+" (encrypted)"]}, base)
		if b, e := best[base], best[step+" (encrypted)"]; b.Wall > 0 {
			fmt.Printf("\nencryption costs %+.1f%% wall (bar: at most +10%%)\n", 100*(e.Wall.Seconds()/b.Wall.Seconds()-1))
		}
	}
	return nil
}
