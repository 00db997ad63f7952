//go:build !long

package main

// packDatasets are the bench pack's datasets TestPackAtSmallScale runs
// under `make test`: none. Building the pack's static binaries and
// running it took a tenth of make test's machine time on 2 cores for a
// benchmark tool, not the product; `make test-long` runs it whole.
var packDatasets []string
