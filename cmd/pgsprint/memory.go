package main

import (
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Soft memory limit of the Go heap (runtime/debug.SetMemoryLimit): a base
// for the run's catalog, manifest and task graph, plus the blocks each
// parallel worker has in flight. Go's collector otherwise lets the heap
// grow to twice what is live before it runs, so a run over 100,000
// tables, whose manifest and plan are built and dropped in large pieces,
// reached twice its live memory in RSS. Near the limit the collector runs
// more often instead; above it (more live memory than the limit) it runs
// at a bounded share of the CPU, never failing the run. GOMEMLIMIT in the
// environment overrides it, as for any Go program.
const (
	memoryLimitBase   = 128 << 20
	memoryLimitPerJob = 32 << 20
)

// memoryLimit is the soft memory limit of a run with jobs workers.
func memoryLimit(jobs int) int64 {
	return memoryLimitBase + int64(max(jobs, 1))*memoryLimitPerJob
}

// setMemoryLimit applies memoryLimit for the command's --jobs, unless the
// user set GOMEMLIMIT.
func setMemoryLimit(cmd *cobra.Command) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	jobs := 1
	if j, err := cmd.Flags().GetInt("jobs"); err == nil { // commands without --jobs: one
		jobs = j
	}
	debug.SetMemoryLimit(memoryLimit(jobs))
}
