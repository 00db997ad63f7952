package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// binary is the pgsprint built once for every test in this package: the
// tests drive it exactly as a user would, exit codes and stderr included.
var binary string

// The commit and build date TestMain stamps the binary with.
const (
	testCommit    = "0123456789abcdef0123456789abcdef01234567"
	testBuildDate = "2026-01-02T03:04:05Z"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pgsprint-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The shared cluster and its torture template get ready while the
	// binary builds.
	pgtest.PrepareShared()
	binary = filepath.Join(dir, "pgsprint")
	// As make build stamps it (TestVersion reads the stamp back), without
	// DWARF, which only a debugger reads: the link takes a third less.
	ldflags := "-w -X main.commit=" + testCommit + " -X main.buildDate=" + testBuildDate
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build pgsprint: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	for _, stop := range []func() error{pgtest.CloseShared, followSource.Close, followTarget.Close} {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
