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

// gcMode is how the collector is paced: a soft memory limit and GOGC.
type gcMode struct {
	limit   int64 // soft memory limit
	percent int   // GOGC
}

// liveGCPercent is the GOGC of a run whose live heap is near or above the
// floor: a collection per quarter of growth of the heap, so that the heap
// stays about a quarter above what is live.
const liveGCPercent = 25

// adaptiveMode paces the collector for a live heap of live bytes. Below
// the floor, the floor's soft limit keeps the heap from doubling (Go's
// default GOGC 100 would). Near it, a limit a quarter above the live heap
// leaves no room: it counts all the runtime's memory (fragmentation, free
// spans, metadata: as much again as a quarter of the heap) against the
// heap's, so the collector ran without pause (a restore of 100,000 tables
// collected every 80 ms, most of its CPU, each time marking the whole
// graph: quadratic in the tables). There GOGC paces it instead, a
// collection per quarter of growth counted in heap bytes, whatever the
// size; the limit, half above the live heap, only makes the runtime give
// back to the system what the heap no longer uses.
func adaptiveMode(floor, live int64) gcMode {
	if live+live/4 < floor {
		return gcMode{limit: floor, percent: 100}
	}
	return gcMode{limit: max(floor, live+live/2), percent: liveGCPercent}
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

// followLiveHeap paces the collector for the live heap (adaptiveMode) for
// the rest of the process; floor 0 leaves it alone. A GOGC in the
// environment is the user's: the mode then only moves the limit.
func followLiveHeap(floor int64) {
	if floor == 0 {
		return
	}
	userGOGC := os.Getenv("GOGC") != ""
	go func() {
		sample := []metrics.Sample{{Name: liveHeapMetric}}
		var cur gcMode
		for range time.Tick(250 * time.Millisecond) {
			metrics.Read(sample)
			if sample[0].Value.Kind() != metrics.KindUint64 {
				continue
			}
			m := adaptiveMode(floor, int64(sample[0].Value.Uint64()))
			if m == cur {
				continue
			}
			cur = m
			if !userGOGC {
				debug.SetGCPercent(m.percent)
			}
			debug.SetMemoryLimit(m.limit)
		}
	}()
}
