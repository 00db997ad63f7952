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
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build pgsprint: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if err := pgtest.CloseShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
