//go:build long

package clone

// long is set by `go test -tags long` (make test-long): TestCrossVersion
// carries each installed version into the newest.
const long = true
