package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	binary = filepath.Join(dir, "pgsprint")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build pgsprint: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished run of the binary.
type result struct {
	code   int
	stdout string
	stderr string
}

// pgsprint runs the binary with args and extra environment variables.
func pgsprint(t testing.TB, env []string, args ...string) result {
	t.Helper()
	return pgsprintStdin(t, env, nil, args...)
}

// pgsprintStdin is pgsprint with stdin (nil: none) as standard input.
func pgsprintStdin(t testing.TB, env []string, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run pgsprint %v: %v", args, err)
	}
	return r
}

// mustPgsprint runs the binary and fails the test unless it exits 0.
func mustPgsprint(t testing.TB, args ...string) result {
	t.Helper()
	r := pgsprint(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("pgsprint %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r
}

// noTempFiles fails if the temporary directory dir (a run's TMPDIR)
// holds anything: every exit pgsprint survives removes its temporary files.
func noTempFiles(t testing.TB, dir string) {
	t.Helper()
	noPartialFiles(t, dir)
}

// noPartialFiles fails if dir holds anything but the names in keep: a failed
// dump must leave no half-written archive behind.
func noPartialFiles(t testing.TB, dir string, keep ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		found := false
		for _, k := range keep {
			found = found || e.Name() == k
		}
		if !found {
			t.Errorf("unexpected file left in %s: %s", dir, e.Name())
		}
	}
}
