// Command report runs the benchmark matrix of the published pg_dump
// comparison with pgsprint in it: every pg_dump format (plain, custom,
// directory, tar) times every compression method and level the installed
// pg_dump supports, restored with psql or pg_restore -j N; pgsprint dump and
// restore for every codec and a range of levels; pgsprint clone and pgcopydb
// clone when present. It runs on six datasets in one throwaway cluster,
// verifies every restore (schema and row hashes equal to the source) and
// writes a results directory: results.csv, results.md and index.html with
// SVG charts.
//
//	go run ./bench/report -size quick      # a few minutes
//	go run ./bench/report -size full       # about 15-20 minutes on 2 CPUs
//	go run ./bench/report -size full -scale 1 -pgsprint-levels "zstd=1,3,9,19 lz4=1,9 gzip=1,6,9 none"
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
	"time"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/results"
)

// preset is a named size: a scale and the level sets.
type preset struct {
	scale      float64
	dumpLevels string
	ownLevels  string
}

// presetFor returns the named size. The full size leaves out the published
// comparison's zstd level 22: pg_dump 17 took 272 s at that level for a
// 30 MB plain dump here (against 3 s at 15), so it alone would take over an
// hour of the matrix; add it with -levels when wanted.
func presetFor(size string) (preset, bool) {
	switch size {
	case "quick":
		return preset{0.1, "gzip=1 lz4=1 zstd=1", "zstd=1 lz4=1 gzip=1 none"}, true
	case "full":
		return preset{0.2, "gzip=1,5,9 lz4=1,5,12 zstd=1,5,15", "zstd=1,3,9 lz4=1 gzip=1 none"}, true
	}
	return preset{}, false
}

// options are the command line.
type options struct {
	size, levels, ownLevels, only, out, bin string
	scale                                   float64
	jobs, tables                            int
	timeout                                 time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.size, "size", "quick", "preset: quick (a few minutes) or full (about 15-20 minutes on 2 CPUs)")
	flag.Float64Var(&o.scale, "scale", 0, "dataset scale (default: the preset's; 1 makes each dataset about 150-250 MB)")
	flag.StringVar(&o.levels, "levels", "", `pg_dump's compression levels, e.g. "gzip=1,5,9 lz4=1,5,12 zstd=1,5,15,22" (default: the preset's)`)
	flag.StringVar(&o.ownLevels, "pgsprint-levels", "", `pgsprint's codecs and levels, e.g. "zstd=1,3,9,19 lz4=1,9 gzip=1,6 none" (default: the preset's)`)
	flag.StringVar(&o.only, "datasets", "pgbench,parts,mixed,many,fk,small", "comma-separated datasets: pgbench, parts, mixed, many, fk, small")
	flag.IntVar(&o.tables, "tables", 0, "tables of the small dataset (default: 1000 times the scale, at least 100)")
	flag.IntVar(&o.jobs, "j", runtime.NumCPU(), "parallel jobs for pg_dump -Fd, pg_restore, pgsprint and the clones")
	flag.StringVar(&o.out, "out", "", "results directory (default: bench/out/<UTC time>-<size>)")
	flag.StringVar(&o.bin, "bin", "", "PostgreSQL bin directory (default: the newest installed; $PGSPRINT_PG_BIN overrides)")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "limit for any one backup or restore command")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench/report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	p, ok := presetFor(o.size)
	if !ok {
		return fmt.Errorf("unknown -size %q (want quick or full)", o.size)
	}
	if o.scale == 0 {
		o.scale = p.scale
	}
	if o.levels == "" {
		o.levels = p.dumpLevels
	}
	if o.ownLevels == "" {
		o.ownLevels = p.ownLevels
	}
	dumpLevels, err := parseLevels(o.levels)
	if err != nil {
		return err
	}
	ownLevels, err := parseLevels(o.ownLevels)
	if err != nil {
		return err
	}
	sets, err := selectDatasets(datasets(o.scale, o.tables), o.only)
	if err != nil {
		return err
	}
	start := time.Now()
	if o.out == "" {
		o.out = filepath.Join("bench", "out", start.UTC().Format("20060102-150405")+"-"+o.size)
	}
	pg, notes, err := findPG(ctx, o.bin)
	if err != nil {
		return err
	}
	work, pgsprint, err := benchkit.WorkDir(ctx, "report")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if len(pg.supported) < 3 {
		notes = append(notes, fmt.Sprintf("pg_dump %s supports only %s compression: the other methods' rows are skipped", pg.version, methodList(pg.supported)))
	}
	s := setup{pg: pg, jobs: o.jobs, workDir: work, pgsprint: pgsprint,
		decompress: decompressors(), dumpLevels: dumpLevels, ownLevels: ownLevels}
	s.hasClone = hasSubcommand(ctx, s.pgsprint, "clone")
	if p, err := exec.LookPath("pgcopydb"); err == nil {
		s.pgcopydb = p
	}
	if s3, err := benchkit.StartS3(ctx, work); err != nil {
		s.s3Skip = "skipped: " + err.Error()
	} else {
		s.s3 = s3
		defer s3.Close()
		notes = append(notes, "pgsprint s3: dump -f s3://... and restore -f s3://... against versitygw on 127.0.0.1 over the same disk (multipart upload, ranged GETs); compare with the file row of the same codec")
	}
	c, err := benchkit.StartCluster(ctx, pg.cluster)
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	defer c.Close()
	notes = append(notes,
		"pg_dump's tar format cannot compress, and pg_restore cannot restore it in parallel: tar runs uncompressed and pg_restore without -j",
		"a plain dump is restored with psql, through gzip -dc / lz4 -dc / zstd -dc when compressed; the other pg_dump formats with pg_restore -j N",
		"pgsprint restores with --no-analyze, as pg_restore does not ANALYZE either",
		"every restore goes into a fresh database after a CHECKPOINT and is verified: schema equal (pg_dump --schema-only) and every table's rows hashed equal; a row has numbers only if it verified",
		"client CPU and peak RSS are of the client processes (pg_dump, pg_restore, psql, pgsprint, decompressors), not the server",
	)
	meta := results.Meta{
		Title:   "pgsprint vs pg_dump: format x compression matrix",
		Started: start, Size: o.size, Scale: o.scale, Jobs: o.jobs, Machine: machine(),
		Server:   fmt.Sprintf("PostgreSQL %d (%s)", c.Version(), pg.cluster),
		PgDump:   fmt.Sprintf("%s in %s; levels %s; pgsprint %s", pg.version, pg.dir, o.levels, o.ownLevels),
		Datasets: map[string]string{}, Notes: notes,
		Command: "go run ./bench/report " + strings.Join(os.Args[1:], " "),
	}
	for _, d := range sets {
		meta.Datasets[d.label] = d.desc
		meta.SortOrder = append(meta.SortOrder, d.label)
	}
	load := sampleLoad(ctx, 10*time.Second)
	defer load.Stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Since(start).Round(time.Second), fmt.Sprintf(format, args...))
	}
	logf("pg_dump %s (%s), server PostgreSQL %d, -j %d, scale %g, results in %s", pg.version, pg.dir, c.Version(), o.jobs, o.scale, o.out)
	r := &runner{c: c, s: s, timeout: o.timeout, log: logf}
	var rows []results.Row
	save := func() error {
		meta.Duration, meta.Load = time.Since(start), load.Summary()
		return results.WriteAll(o.out, meta, rows)
	}
	for _, d := range sets {
		src, err := r.prepare(ctx, d)
		if err != nil {
			return err
		}
		for i, v := range s.variants() {
			row, err := r.run(ctx, src, v, i)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", d.label, v.row.Label(), err)
			}
			rows = append(rows, row)
			switch {
			case row.OK() && row.IsClone():
				logf("%s, %s: %.2f s, verified", d.label, row.Label(), row.Total())
			case row.OK():
				logf("%s, %s: backup %.2f s, restore %.2f s, %.1f%% of the database, verified", d.label, row.Label(), row.BackupSeconds, row.RestoreSeconds, 100*row.SizeRatio())
			default:
				logf("%s, %s: %s", d.label, row.Label(), row.Status)
			}
			if err := save(); err != nil {
				return err
			}
		}
		if err := r.dropDB(ctx, src.name); err != nil {
			return err
		}
	}
	if err := save(); err != nil {
		return err
	}
	logf("done: %s", filepath.Join(o.out, results.HTMLFile))
	return nil
}
