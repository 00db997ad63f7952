package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	benchdata "github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// dataset is one of the run's databases at its scale: seed 000's two
// (pgbench, flat and in 30 partitions), two of real data (issue 43): the
// mixed three tables of text of a published pg_dump comparison, and
// TPC-H; and thousands of tiny tables, whose dump is measured against
// pg_dump --schema-only alone (schemaSteps).
type dataset struct {
	key        string // flat, parts, mixed, tpch, tables
	db         string // the source database's name
	label      string
	partitions int
	size       float64 // mixed's scale or TPC-H's scale factor
	tables     int     // the tables dataset's table count
}

// datasetNames are the datasets -datasets takes.
const datasetNames = "flat, parts, mixed, tpch, tables"

// datasetNamed is the dataset called name at c's scales.
func datasetNamed(name string, c config) (dataset, bool) {
	scale := c.scale
	switch name {
	case "flat":
		return dataset{key: name, db: fmt.Sprintf("pgbench_s%d", scale), label: fmt.Sprintf("pgbench -s %d", scale)}, true
	case "parts":
		return dataset{key: name, db: fmt.Sprintf("pgbench_s%d_p30", scale), label: fmt.Sprintf("pgbench -s %d --partitions=30", scale), partitions: 30}, true
	case "mixed":
		return dataset{key: name, db: "mixed_" + sizeName(c.mixed), label: fmt.Sprintf("mixed, scale %g", c.mixed), size: c.mixed}, true
	case "tpch":
		return dataset{key: name, db: "tpch_sf" + sizeName(c.tpch), label: fmt.Sprintf("TPC-H SF %g", c.tpch), size: c.tpch}, true
	case "tables":
		return dataset{key: name, db: fmt.Sprintf("tables_%d", c.tables), label: fmt.Sprintf("%d small tables", c.tables), tables: c.tables}, true
	}
	return dataset{}, false
}

// sizeName is a scale as a database name's part: 0.5 is 0_5.
func sizeName(f float64) string {
	return strings.ReplaceAll(strconv.FormatFloat(f, 'g', -1, 64), ".", "_")
}

// schemaSteps says whether d is measured by its dump against pg_dump
// --schema-only alone (the tables dataset), with no restore to verify.
func (d dataset) schemaSteps() bool { return d.key == "tables" }

// builtMark is the comment a mixed or TPC-H database gets once it is
// complete, so that a run with -keep reuses it and one cut short does not.
func builtMark(d dataset) string { return "pgsprint bench: " + d.label + ", complete" }

// build makes d's database from nothing.
func (e *env) build(ctx context.Context, d dataset) error {
	conn := e.srv.ConnString(d.db)
	jobs := max(runtime.NumCPU(), 2)
	var err error
	switch d.key {
	case "mixed":
		err = benchdata.MixedJobs(ctx, conn, d.size, jobs)
	case "tpch":
		err = benchdata.TPCH(ctx, e.cfg.tpchgen, e.work, conn, d.size, jobs)
	case "tables":
		err = benchdata.Tables(ctx, conn, d.tables)
	default:
		return benchdata.Pgbench(ctx, e.srv.BinDir(), conn, e.cfg.scale, d.partitions)
	}
	if err != nil {
		return err
	}
	return e.srv.Exec(ctx, d.db, "COMMENT ON DATABASE "+pgx.Identifier{d.db}.Sanitize()+" IS "+pg.Literal(builtMark(d)))
}

// source is a built dataset with what restores are checked against.
type source struct {
	dataset
	bytes  int64             // pg_database_size
	schema string            // pg_dump --schema-only, normalized by compare
	rows   map[string]string // per-table row fingerprints
}

// GiB is the source's size in GiB, the unit of the seconds-per-GiB column.
func (s *source) GiB() float64 { return float64(s.bytes) / (1 << 30) }

// prepare builds the dataset unless a complete one is already there
// (pgbench_branches holds one row per scale unit and is filled last but
// for the keys), then records its size, schema and row fingerprint.
func (e *env) prepare(ctx context.Context, d dataset) (*source, error) {
	src := &source{dataset: d}
	if !e.built(ctx, d) {
		if err := e.createDB(ctx, d.db); err != nil {
			return nil, err
		}
		start := time.Now()
		fmt.Fprintf(os.Stderr, "building %s...\n", d.label)
		if err := e.build(ctx, d); err != nil {
			return nil, fmt.Errorf("build %s: %w", d.label, err)
		}
		fmt.Fprintf(os.Stderr, "built %s in %s\n", d.label, time.Since(start).Round(time.Second))
	}
	conn, err := pgx.Connect(ctx, e.srv.ConnString(d.db))
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&src.bytes); err != nil {
		return nil, fmt.Errorf("size of %s: %w", d.db, err)
	}
	if e.cfg.verify != "none" && !d.schemaSteps() {
		fmt.Fprintf(os.Stderr, "%s: reading its schema and row fingerprints...\n", d.label)
		if src.schema, err = compare.SchemaDump(ctx, e.srv.BinDir(), e.srv.ConnString(d.db)); err != nil {
			return nil, fmt.Errorf("schema of %s: %w", d.label, err)
		}
		if src.rows, err = e.fingerprint(ctx, d.db); err != nil {
			return nil, fmt.Errorf("fingerprint of %s: %w", d.label, err)
		}
	}
	return src, nil
}

// built says whether d's database holds a complete dataset of the run's
// scale (and partitioning), from an earlier run with -keep.
func (e *env) built(ctx context.Context, d dataset) bool {
	conn, err := pgx.Connect(ctx, e.srv.ConnString(d.db))
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if d.key == "mixed" || d.key == "tpch" || d.key == "tables" {
		var mark *string
		err := conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()").Scan(&mark)
		return err == nil && mark != nil && *mark == builtMark(d)
	}
	var branches, parts int
	var keyed bool
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pgbench_branches),
		(SELECT count(*) FROM pg_inherits WHERE inhparent = 'pgbench_accounts'::regclass),
		EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'pgbench_accounts'::regclass AND contype = 'p')`).Scan(&branches, &parts, &keyed)
	return err == nil && branches == e.cfg.scale && parts == d.partitions && keyed
}

func (e *env) fingerprint(ctx context.Context, db string) (map[string]string, error) {
	cfg, err := pgx.ParseConfig(e.srv.ConnString(db))
	if err != nil {
		return nil, err
	}
	return compare.FingerprintParallel(ctx, cfg, max(e.cfg.jobs[0], 2))
}

// verify compares a restored database with its source: schema as pg_dump
// prints it, and every table's rows. It returns the first difference, or
// "" when they are the same.
func (e *env) verify(ctx context.Context, src *source, db string) string {
	schema, err := compare.SchemaDump(ctx, e.srv.BinDir(), e.srv.ConnString(db))
	if err != nil {
		return err.Error()
	}
	if d := compare.SchemaDiff(src.schema, schema); d != "" {
		return "schema differs: " + firstLine(d)
	}
	rows, err := e.fingerprint(ctx, db)
	if err != nil {
		return err.Error()
	}
	if d := compare.FingerprintDiff(src.rows, rows); len(d) > 0 {
		return fmt.Sprintf("rows differ in %d relations, first: %s", len(d), firstLine(d[0]))
	}
	return ""
}
