package main

import (
	"context"
	"fmt"
	"math"
	"strings"

	bds "github.com/pgsprint/pgsprint/bench/dataset"
)

// dataset is one database the matrix runs on.
type dataset struct {
	key   string // for -datasets and database names
	label string // in the report
	desc  string
	build func(ctx context.Context, binDir, conn string) error
}

// datasets returns the report's datasets at a scale: 1 makes each about
// 150-250 MB on disk; they shrink and grow linearly. The small-tables
// dataset is sized by its table count instead (tables; 0 is 1,000 times
// the scale, at least 100), since its cost is per table.
func datasets(scale float64, tables int) []dataset {
	if tables <= 0 {
		tables = max(100, int(math.Round(1000*scale)))
	}
	pgScale := max(1, int(math.Round(10*scale)))
	mixed, many, fk := 0.15*scale, 0.5*scale, 0.2*scale
	return []dataset{
		{"pgbench", fmt.Sprintf("pgbench -s %d", pgScale),
			fmt.Sprintf("one big table: pgbench -i -s %d (pgbench_accounts holds %d rows)", pgScale, pgScale*100_000),
			func(ctx context.Context, bin, conn string) error { return bds.Pgbench(ctx, bin, conn, pgScale, 0) }},
		{"parts", fmt.Sprintf("pgbench -s %d, 30 partitions", pgScale),
			fmt.Sprintf("the same table in 30 partitions: pgbench -i -s %d --partitions=30", pgScale),
			func(ctx context.Context, bin, conn string) error { return bds.Pgbench(ctx, bin, conn, pgScale, 30) }},
		{"mixed", fmt.Sprintf("mixed, scale %.3g", mixed),
			"three realistic tables (people, orders, activity logs) of varying text, 10 secondary indexes",
			func(ctx context.Context, _, conn string) error { return bds.Mixed(ctx, conn, mixed) }},
		{"many", fmt.Sprintf("60 tables, scale %.3g", many),
			"60 tables of mixed sizes, three of which hold about 90% of the rows",
			func(ctx context.Context, _, conn string) error { return bds.Many(ctx, conn, many) }},
		{"fk", fmt.Sprintf("FK-heavy, scale %.3g", fk),
			"24 tables, 30 foreign keys, 60 indexes",
			func(ctx context.Context, _, conn string) error { return bds.FKHeavy(ctx, conn, fk) }},
		{"small", fmt.Sprintf("%d small tables", tables),
			fmt.Sprintf("%d tables of %d rows, each with a primary key and a secondary index, a third with a foreign key: the per-table cost", tables, bds.SmallRows),
			func(ctx context.Context, _, conn string) error { return bds.Small(ctx, conn, tables) }},
	}
}

// selectDatasets keeps the datasets named in the comma-separated list.
func selectDatasets(all []dataset, list string) ([]dataset, error) {
	var out []dataset
	for _, k := range strings.Split(list, ",") {
		k = strings.TrimSpace(k)
		found := false
		for _, d := range all {
			if d.key == k {
				out = append(out, d)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown dataset %q (have pgbench, parts, mixed, many, fk, small)", k)
		}
	}
	return out, nil
}
