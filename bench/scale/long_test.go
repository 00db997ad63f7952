//go:build long

package main

// packDatasets are the bench pack's datasets TestPackAtSmallScale runs
// under `make test-long`: all four, TPC-H when tpchgen-cli can be put in
// the pack.
var packDatasets = []string{"flat", "parts", "mixed", "tpch"}
