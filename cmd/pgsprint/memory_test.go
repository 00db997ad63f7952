package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"

	"github.com/spf13/cobra"
)

// TestMemoryLimit checks the soft memory limit each command sets from its
// --jobs, and that GOMEMLIMIT in the environment wins.
func TestMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name     string
		args     []string
		withJobs bool
		env      string
		want     int64
	}{
		{"default jobs", nil, true, "", memoryLimitBase + 3*memoryLimitPerJob},
		{"-j 2", []string{"-j", "2"}, true, "", 192 << 20},
		{"-j 0 counts as one", []string{"-j", "0"}, true, "", 160 << 20},
		{"no --jobs flag", nil, false, "", 160 << 20},
		{"GOMEMLIMIT wins", []string{"-j", "2"}, true, "1GiB", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(math.MaxInt64)
			cmd := &cobra.Command{Use: "x", Run: func(*cobra.Command, []string) {}}
			if tc.withJobs {
				cmd.Flags().IntP("jobs", "j", 3, "")
			}
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			set := setMemoryLimit(cmd)
			if got := debug.SetMemoryLimit(-1); got != tc.want || (set != 0) != (tc.env == "") {
				t.Errorf("memory limit %d MiB, want %d MiB", got>>20, tc.want>>20)
			}
		})
	}
}

// TestAdaptiveMode checks the collector's pacing: under the floor's soft
// limit while the live heap is well below it, by GOGC 25 under a limit
// half above the live heap once it nears or passes the floor.
func TestAdaptiveMode(t *testing.T) {
	const floor = 192 << 20
	for _, tc := range []struct {
		live int64
		want gcMode
	}{
		{0, gcMode{floor, 100}},
		{100 << 20, gcMode{floor, 100}},
		{160 << 20, gcMode{240 << 20, liveGCPercent}},
		{400 << 20, gcMode{600 << 20, liveGCPercent}},
	} {
		if got := adaptiveMode(floor, tc.live); got != tc.want {
			t.Errorf("adaptiveMode(%d MiB, %d MiB) = %+v, want %+v", floor>>20, tc.live>>20, got, tc.want)
		}
	}
}

// TestCollectionsAboveFloor: a live heap above the floor is collected
// about once per quarter of its size allocated, not without pause. A run
// over 100,000 tables holds its graph live (hundreds of MB) while it
// allocates for every table; with a soft limit a quarter above the live
// heap, the collector ran back to back, each time marking the whole heap:
// quadratic in the tables. Here 48 MiB stay live above a 16 MiB floor
// while 192 MiB of garbage is allocated: about 16 collections at GOGC 25,
// where the old limit made 41.
func TestCollectionsAboveFloor(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const floor = 16 << 20
	// Small objects with pointers, as a task graph is made of.
	type node struct {
		next *node
		name string
		pad  [6]int64
	}
	var live *node
	for range 48 << 20 / 80 {
		live = &node{next: live, name: "x"}
	}
	runtime.GC()
	sample := []metrics.Sample{{Name: liveHeapMetric}}
	metrics.Read(sample)
	m := adaptiveMode(floor, int64(sample[0].Value.Uint64()))
	debug.SetGCPercent(m.percent)
	debug.SetMemoryLimit(m.limit)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var sink *node
	for range 192 << 20 / 80 {
		sink = &node{next: sink}
		if sink.pad[0]++; len(sink.name) == 0 {
			sink.next = nil
		}
	}
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(live)
	runtime.KeepAlive(sink)
	n := after.NumGC - before.NumGC
	t.Logf("%d collections", n)
	if n > 24 {
		t.Errorf("%d collections for 192 MiB allocated beside 48 MiB live, want at most 24 (one per quarter of the live heap, with slack)", n)
	}
}
