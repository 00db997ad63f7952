package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDumpToStdout: with -f - (or no -f) the archive goes to standard
// output, and is the same archive a file would hold.
func TestDumpToStdout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", `CREATE TABLE t AS SELECT i, md5(i::text) FROM generate_series(1, 30000) i`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, args := range [][]string{{"-f", "-"}, {}} {
		file := filepath.Join(dir, "piped.pgs")
		out, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, append([]string{"dump", "-d", c.ConnString("src"), "-q", "-j", "2"}, args...)...)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("dump to stdout: %v %s", err, stderr.String())
		}
		out.Close()
		mustPgsprint(t, "verify", file)
		r := mustPgsprint(t, "list", file)
		if !strings.Contains(r.stdout, "30000") {
			t.Errorf("archive from stdout lacks the table's rows:\n%s", r.stdout)
		}
		os.Remove(file)
	}
}
