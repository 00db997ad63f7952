package restore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
)

// TestSlowestTasks: the n longest tasks, longest first, the earlier run
// first among equals, fewer when fewer ran.
func TestSlowestTasks(t *testing.T) {
	g := &schedule.Graph{}
	var timings []taskgraph.Timing
	for i, ms := range []int{5, 9, 1, 9, 7, 3, 8} {
		g.Add(&schedule.Task{Name: fmt.Sprint("t", i)})
		timings = append(timings, taskgraph.Timing{Task: i, Start: time.Second, End: time.Second + time.Duration(ms)*time.Millisecond})
	}
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{3, []string{"t1", "t3", "t6"}},
		{5, []string{"t1", "t3", "t6", "t4", "t0"}},
		{10, []string{"t1", "t3", "t6", "t4", "t0", "t5", "t2"}},
	} {
		var got []string
		for _, it := range slowestTasks(g, timings, tc.n) {
			got = append(got, it.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("n=%d: %q, want %q", tc.n, got, tc.want)
		}
	}
}
