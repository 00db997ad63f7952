// Package dataset builds the benchmark databases: pgbench's tables, a mixed
// realistic three-table dataset, 60 tables of mixed sizes, and an FK-heavy
// schema. Data is generated server-side with generate_series, so building
// is bounded by the server, not by a client.
package dataset

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Pgbench runs `pgbench -i -q -s scale` (with --partitions when > 0) from
// binDir against connString, then ANALYZE, as the issues' datasets specify.
func Pgbench(ctx context.Context, binDir, connString string, scale, partitions int) error {
	args := []string{"-i", "-q", "-s", strconv.Itoa(scale)}
	if partitions > 0 {
		args = append(args, "--partitions="+strconv.Itoa(partitions))
	}
	args = append(args, connString)
	if out, err := exec.CommandContext(ctx, filepath.Join(binDir, "pgbench"), args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pgbench -i: %v: %s", err, out)
	}
	return execSQL(ctx, connString, "ANALYZE")
}

// execSQL runs statements one by one on a fresh connection.
func execSQL(ctx context.Context, connString string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%.60s...: %w", s, err)
		}
	}
	return nil
}

// rows scales a row count, at least 1.
func rows(base int, scale float64) int {
	return max(1, int(float64(base)*scale))
}

// rstr is an SQL expression for a random string of min to min+spread
// characters, so that rows vary in length as real text does.
func rstr(min, spread int) string {
	return fmt.Sprintf("substr(repeat(md5(random()::text), %d), 1, %d + (random() * %d)::int)", (min+spread)/32+1, min, spread)
}
