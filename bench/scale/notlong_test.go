//go:build !long

package main

// packDatasets are the bench pack's datasets TestPackAtSmallScale runs
// under `make test`: the flat one (the partitioned one under -tags long).
var packDatasets = []string{"flat"}
