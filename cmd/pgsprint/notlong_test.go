//go:build !long

package main

// long is set by `go test -tags long` (make test-long): the slow
// repetitions (more kill iterations) run in full. Without it, `make test`
// runs each case of a repeated test once.
const long = false
