package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/results"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// source is one built dataset and what every restore must equal.
type source struct {
	name   string // database name
	label  string // the dataset's name in the report
	bytes  int64
	schema string
	rows   map[string]string
}

// runner runs variants against one cluster.
type runner struct {
	c       *pgtest.Instance
	s       setup
	timeout time.Duration // per command
	log     func(format string, args ...any)
}

// prepare builds a dataset into a fresh database and records its size,
// schema and row fingerprint.
func (r *runner) prepare(ctx context.Context, d dataset) (source, error) {
	src := source{name: "src_" + d.key, label: d.label}
	if err := r.c.CreateDB(ctx, src.name); err != nil {
		return src, err
	}
	start := time.Now()
	if err := d.build(ctx, r.c.BinDir(), r.c.ConnString(src.name)); err != nil {
		return src, fmt.Errorf("build %s: %w", d.label, err)
	}
	r.log("%s: built in %.1f s", d.label, time.Since(start).Seconds())
	var err error
	if src.bytes, err = r.dbSize(ctx, src.name); err != nil {
		return src, err
	}
	if src.schema, err = compare.SchemaDump(ctx, r.s.pg.dir, r.c.ConnString(src.name)); err != nil {
		return src, fmt.Errorf("schema of %s: %w", d.label, err)
	}
	if src.rows, err = r.fingerprint(ctx, src.name); err != nil {
		return src, fmt.Errorf("fingerprint of %s: %w", d.label, err)
	}
	return src, nil
}

func (r *runner) fingerprint(ctx context.Context, db string) (map[string]string, error) {
	cfg, err := pgx.ParseConfig(r.c.ConnString(db))
	if err != nil {
		return nil, fmt.Errorf("fingerprint: %w", err)
	}
	return compare.FingerprintParallel(ctx, cfg, r.s.jobs)
}

func (r *runner) dbSize(ctx context.Context, db string) (int64, error) {
	conn, err := pgx.Connect(ctx, r.c.ConnString("postgres"))
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", db, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var n int64
	if err := conn.QueryRow(ctx, "SELECT pg_database_size($1)", db).Scan(&n); err != nil {
		return 0, fmt.Errorf("size of %s: %w", db, err)
	}
	return n, nil
}

// checkpoint flushes dirty buffers so that no restore pays for the
// previous one's writes.
func (r *runner) checkpoint(ctx context.Context) error {
	return r.c.Exec(ctx, "postgres", "CHECKPOINT")
}

func (r *runner) dropDB(ctx context.Context, db string) error {
	return r.c.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
}

// run measures one variant on src: backup, restore into a fresh database,
// verify, sizes. Any failure becomes the row's status; only an error of the
// harness itself (the cluster gone) is returned.
func (r *runner) run(ctx context.Context, src source, v variant, n int) (results.Row, error) {
	row := v.row
	row.Dataset, row.DatabaseBytes = src.label, src.bytes
	if v.skip != "" {
		row.Status = v.skip
		return row, nil
	}
	path := filepath.Join(r.s.workDir, fmt.Sprintf("backup-%03d%s", n, v.ext))
	stored := path
	if v.stored != nil {
		stored = v.stored(path)
	}
	dst := "dst"
	defer os.RemoveAll(stored)
	if err := r.dropDB(ctx, dst); err != nil {
		return row, err
	}
	defer r.dropDB(context.WithoutCancel(ctx), dst)
	if v.backup != nil {
		// DROP DATABASE of the previous restore has just checkpointed.
		res := r.measure(ctx, "backup", []benchkit.Command{v.backup(r.c.ConnString(src.name), path)})
		if res.Err != nil {
			row.Status = "failed: backup: " + res.Err.Error()
			return row, nil
		}
		row.BackupSeconds, row.BackupCPU, row.PeakRSS = res.Wall.Seconds(), res.CPU.Seconds(), res.MaxRSS
		size, err := benchkit.DiskSize(stored)
		if err != nil {
			row.Status = "failed: backup: " + err.Error()
			return row, nil
		}
		row.BackupBytes = size
	}
	if err := r.c.CreateDB(ctx, dst); err != nil {
		return row, err
	}
	if err := r.checkpoint(ctx); err != nil {
		return row, err
	}
	var cmds []benchkit.Command
	if v.clone != nil {
		cmds = []benchkit.Command{v.clone(r.c.ConnString(src.name), r.c.ConnString(dst))}
	} else {
		cmds = v.restore(path, r.c.ConnString(dst))
	}
	res := r.measure(ctx, "restore", cmds)
	if res.Err != nil {
		row.Status = "failed: restore: " + res.Err.Error()
		return row, nil
	}
	row.RestoreSeconds, row.RestoreCPU, row.PeakRSS = res.Wall.Seconds(), res.CPU.Seconds(), max(row.PeakRSS, res.MaxRSS)
	if msg := r.verify(ctx, src, dst); msg != "" {
		row.Status = "failed: verify: " + msg
		return row, nil
	}
	size, err := r.dbSize(ctx, dst)
	if err != nil {
		return row, err
	}
	row.RestoredBytes = size
	row.Status = results.StatusVerified
	return row, nil
}

// measure runs one command, or two as a pipeline, within the timeout.
func (r *runner) measure(ctx context.Context, what string, cmds []benchkit.Command) benchkit.Result {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if len(cmds) == 2 {
		whole, _, _ := benchkit.Pipeline(ctx, what, cmds[0], cmds[1])
		return whole
	}
	return benchkit.Run(ctx, what, cmds[0], nil)
}

// verify compares dst with the source: schema as pg_dump prints it, and
// every table's rows. It returns the first difference, or "".
func (r *runner) verify(ctx context.Context, src source, dst string) string {
	schema, err := compare.SchemaDump(ctx, r.s.pg.dir, r.c.ConnString(dst))
	if err != nil {
		return err.Error()
	}
	if d := compare.SchemaDiff(src.schema, schema); d != "" {
		return "schema differs: " + firstLines(d, 6)
	}
	rows, err := r.fingerprint(ctx, dst)
	if err != nil {
		return err.Error()
	}
	if d := compare.FingerprintDiff(src.rows, rows); len(d) > 0 {
		return fmt.Sprintf("rows differ in %d relations, first: %s", len(d), strings.ReplaceAll(d[0], "\n", " "))
	}
	return ""
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " / ")
}
