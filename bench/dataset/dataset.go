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

	"github.com/pgsprint/pgsprint/internal/sample"
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
	return sample.ExecEach(ctx, connString, "ANALYZE")
}
