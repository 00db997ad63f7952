//go:build !long

package pgtest

// Long is set by `go test -tags long` (make test-long): the slow and
// randomized variants of the tests run in full.
const Long = false
