//go:build long

package main

// packDatasets are the bench pack's datasets TestPackAtSmallScale runs
// under `make test-long`: both.
var packDatasets = []string{"flat", "parts"}
