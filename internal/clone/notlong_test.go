//go:build !long

package clone

// long is set by `go test -tags long` (make test-long): TestCrossVersion
// carries each installed version into the newest. Without it, `make test`
// carries the oldest into the newest only.
const long = false
