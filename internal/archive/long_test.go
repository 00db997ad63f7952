//go:build long

package archive

// long is set by `go test -tags long` (make test-long): the damage tests
// that sample an archive's bytes under `make test` take every byte.
const long = true
