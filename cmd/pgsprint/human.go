package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// sizeFlag is a byte count flag that takes a plain number or one with a
// unit as PostgreSQL settings do ("64MB", "512kB", "1GB", binary
// multiples; "MiB" style accepted too).
type sizeFlag int64

func (s *sizeFlag) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}} {
		if *s != 0 && int64(*s)%u.n == 0 {
			return strconv.FormatInt(int64(*s)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(*s), 10)
}

// Type names the flag's value in --help.
func (s *sizeFlag) Type() string { return "size" }

// Set parses a value such as "64MB".
func (s *sizeFlag) Set(v string) error {
	num := strings.TrimRight(v, "kKMGTiBb ")
	unit := strings.TrimSpace(strings.TrimPrefix(v, num))
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("invalid size %q (want a number of bytes, or with kB, MB, GB, TB)", v)
	}
	mult := map[string]int64{"": 1, "B": 1, "kB": 1 << 10, "KB": 1 << 10, "KiB": 1 << 10,
		"MB": 1 << 20, "MiB": 1 << 20, "GB": 1 << 30, "GiB": 1 << 30, "TB": 1 << 40, "TiB": 1 << 40}[unit]
	if mult == 0 {
		return fmt.Errorf("invalid size unit in %q (want kB, MB, GB or TB)", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}

// startCPUProfile writes a CPU profile to path until the returned stop
// is called: where a dump's client-side time goes, for benchmarks.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
