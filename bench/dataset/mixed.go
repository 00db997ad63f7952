package dataset

import (
	"context"
	"runtime"

	"github.com/pgsprint/pgsprint/internal/sample"
)

// Mixed builds sample.Mixed's three-table dataset (scale 1 is about 1 GB)
// on as many connections as the machine has cores.
func Mixed(ctx context.Context, connString string, scale float64) error {
	return sample.Mixed(ctx, connString, scale, runtime.NumCPU())
}

// MixedJobs builds sample.Mixed's dataset on jobs connections at once.
func MixedJobs(ctx context.Context, connString string, scale float64, jobs int) error {
	return sample.Mixed(ctx, connString, scale, jobs)
}
