package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/spf13/cobra"
)

// Soft memory limit of the Go heap (runtime/debug.SetMemoryLimit): a floor
// for the run's catalog, manifest and task graph, plus the blocks each
// parallel worker has in flight. Go's collector otherwise lets the heap
// grow to twice what is live before it runs, so a run over 100,000
// tables, whose manifest and plan are built and dropped in large pieces,
// reached twice its live memory in RSS. Near the limit the collector runs
// more often instead. GOMEMLIMIT in the environment overrides it, as for
// any Go program.
const (
	memoryLimitBase   = 128 << 20
	memoryLimitPerJob = 32 << 20
)

// memoryLimit is the floor of the soft memory limit of a run with jobs
// workers.
func memoryLimit(jobs int) int64 {
	return memoryLimitBase + int64(max(jobs, 1))*memoryLimitPerJob
}

// adaptiveLimit is the soft memory limit when live bytes of the heap are
// in use: the floor, or a quarter above what is live. A limit below the
// live heap would make the collector run all the time (up to half the
// CPU); a quarter of headroom is a collection per quarter of growth.
func adaptiveLimit(floor, live int64) int64 {
	return max(floor, live+live/4)
}

// liveHeapMetric is the runtime's count of heap bytes marked live by the
// last collection.
const liveHeapMetric = "/gc/heap/live:bytes"

// setMemoryLimit applies the soft memory limit for the command's --jobs,
// unless the user set GOMEMLIMIT, and returns it (0: none set).
func setMemoryLimit(cmd *cobra.Command) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	jobs := 1
	if j, err := cmd.Flags().GetInt("jobs"); err == nil { // commands without --jobs: one
		jobs = j
	}
	floor := memoryLimit(jobs)
	debug.SetMemoryLimit(floor)
	return floor
}

// followLiveHeap keeps the soft memory limit a quarter above the live heap
// (adaptiveLimit) for the rest of the process; floor 0 leaves it alone.
func followLiveHeap(floor int64) {
	if floor == 0 {
		return
	}
	go func() {
		sample := []metrics.Sample{{Name: liveHeapMetric}}
		for range time.Tick(250 * time.Millisecond) {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				debug.SetMemoryLimit(adaptiveLimit(floor, int64(sample[0].Value.Uint64())))
			}
		}
	}()
}
