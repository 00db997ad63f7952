package restore

import (
	"testing"

	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// TestStepWork checks the weights the restore's ETA gives non-data tasks
// (progress.Expected.StepWork): an index build a quarter of loading its
// table, ANALYZE a sample whatever the table's size, data none.
func TestStepWork(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		kind taskgraph.Group
		cost int64
		want int64
	}{
		{taskgraph.Data, gib, 0},
		{taskgraph.Index, gib, gib / 4},
		{taskgraph.Constraint, gib, gib / 4},
		{taskgraph.ForeignKey, 10 * gib, gib},
		{taskgraph.Analyze, 1 << 20, 1 << 20 / 20},
		{taskgraph.Analyze, 100 * gib, analyzeMax},
		{taskgraph.Rest, 0, restWork},
	} {
		if got := stepWork(tc.kind, tc.cost); got != tc.want {
			t.Errorf("%s of %d bytes: %d, want %d", tc.kind, tc.cost, got, tc.want)
		}
	}
}
