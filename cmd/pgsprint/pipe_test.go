package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestPipeAndCloneTorture moves the torture database without a file: dump
// -f - | restore -f - (directly, and through cat with fewer restore
// connections than dump workers, which makes the restore spill) and clone
// (in many chunks, and unsplit with --clean over an existing copy). Schema
// text, row hashes and constraint validity must be identical each time.
// One cluster and one torture load serve every case. The direct pipe (which
// the pipe through cat covers, spilling besides) and the clone all in text
// (the clone in chunks copies the types binary COPY cannot carry in text)
// run under `make test-long` only.
func TestPipeAndCloneTorture(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	src := pgtest.TortureDB(t, c, `src "pipe" ünï`)
	spill := t.TempDir()
	same := func(t *testing.T, dst string) {
		t.Helper()
		pgtest.RequireTorture(t, c, c.ConnString(dst))
		requireSameValidity(t, c.ConnString(src), c.ConnString(dst))
	}
	for _, tc := range []struct {
		name         string
		dumpJ, restJ string
		throughCat   bool
		chunkSize    string
		longOnly     bool // only under `make test-long`
	}{
		{"pipe direct", "3", "3", false, "64MB", true},
		{"pipe through cat, more dump workers than restore connections", "4", "1", true, "64kB", false},
	} {
		if tc.longOnly && !long {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			dst := pgtest.DB(t, c, "dst "+tc.name)
			cmds := [][]string{{"pgsprint", "dump", "-q", "-f", "-", "-j", tc.dumpJ, "--chunk-size", tc.chunkSize, "-d", c.ConnString(src)}}
			if tc.throughCat {
				cmds = append(cmds, []string{"cat"})
			}
			cmds = append(cmds, []string{"pgsprint", "restore", "-q", "-f", "-", "-j", tc.restJ, "--spill-dir", spill, "-d", c.ConnString(dst)})
			for i, r := range runPipeline(t, cmds...) {
				if r.code != 0 {
					t.Fatalf("%s: exit %d: %s", cmds[i][:2], r.code, r.stderr)
				}
			}
			same(t, dst)
			if left, _ := os.ReadDir(spill); len(left) != 0 {
				t.Errorf("%d spill files left in --spill-dir", len(left))
			}
		})
	}
	clone := pgtest.DB(t, c, "clone")
	t.Run("clone in chunks", func(t *testing.T) {
		r := mustPgsprint(t, "clone", "-v", "--progress", "none", "--source", c.ConnString(src), "--target", c.ConnString(clone), "-j", "3", "--chunk-size", "64kB")
		same(t, clone)
		// One major version on both sides: tables of built-in types go in
		// binary, the others (enums, domains, composites...) in text, and
		// both kinds came back identical above.
		m := regexp.MustCompile(`"binary tables"=(\d+) "text tables"=(\d+)`).FindStringSubmatch(r.stderr)
		if m == nil || m[1] == "0" || m[2] == "0" {
			t.Errorf("want tables in both copy formats, got %q", m)
		}
	})
	t.Run("clone in text", func(t *testing.T) {
		if !long {
			t.Skip("under make test-long only: clone in chunks copies the text-only types in text")
		}
		cloneText := pgtest.DB(t, c, "clone text")
		mustPgsprint(t, "clone", "-q", "--text-copy", "--source", c.ConnString(src), "--target", c.ConnString(cloneText), "-j", "2", "--chunk-size", "64kB")
		same(t, cloneText)
	})
	t.Run("clone unsplit with --clean", func(t *testing.T) {
		r := pgsprint(t, nil, "clone", "--source", c.ConnString(src), "--target", c.ConnString(clone))
		if r.code == 0 || !strings.Contains(r.stderr, "not empty") {
			t.Fatalf("clone into a non-empty target: exit %d: %s", r.code, r.stderr)
		}
		mustPgsprint(t, "clone", "-q", "--clean", "--source", c.ConnString(src), "--target", c.ConnString(clone), "-j", "1", "--chunk-size", "0")
		same(t, clone)
	})
	t.Run("clone usage", func(t *testing.T) {
		if r := pgsprint(t, nil, "clone", "--source", c.ConnString(src)); r.code != exitUsage {
			t.Errorf("clone without --target: exit %d, want %d", r.code, exitUsage)
		}
	})
}

// TestPipeBroken: a pipe that breaks mid-way makes the other side fail
// with one clear line and a non-zero exit, and the partly restored target
// is left for --clean.
func TestPipeBroken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Shared(t)
	src := pgtest.DB(t, c, "src")
	err := c.Exec(ctx, src, `CREATE TABLE big (i int PRIMARY KEY, pad text);
		INSERT INTO big SELECT i, md5(i::text) || md5((-i)::text) FROM generate_series(1, 100000) i;
		CREATE TABLE small AS SELECT i FROM generate_series(1, 1000) i; ANALYZE`)
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(t.TempDir(), "full.pgs")
	mustPgsprint(t, "dump", "-q", "-Z", "none", "-j", "2", "--chunk-size", "4MB", "-f", full, "-d", c.ConnString(src))
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}

	requireOneLineError := func(t *testing.T, r result, want string) {
		t.Helper()
		if r.code == 0 {
			t.Fatal("exit 0 from a broken pipe")
		}
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "pgsprint: error:") || !strings.Contains(lines[0], want) {
			t.Fatalf("want one error line mentioning %q, got:\n%s", want, r.stderr)
		}
	}

	for _, cut := range []struct {
		name string
		at   int
		want string
	}{
		{"in the header", 100, "standard input"},
		{"mid-way", len(data) / 2, "incomplete"},
		{"before the trailer", len(data) - 10, "incomplete"},
	} {
		t.Run("bytes cut "+cut.name, func(t *testing.T) {
			dst := pgtest.DB(t, c, "cut "+cut.name)
			cmd := exec.Command(binary, "restore", "-q", "-f", "-", "-j", "2", "-d", c.ConnString(dst))
			cmd.Stdin = bytes.NewReader(data[:cut.at])
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			r := result{stderr: stderr.String()}
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			}
			requireOneLineError(t, r, cut.want)
			if cut.name == "mid-way" {
				// The target is partly restored; --clean makes it whole.
				cmd := exec.Command(binary, "restore", "-q", "-f", "-", "--clean", "-d", c.ConnString(dst))
				cmd.Stdin = bytes.NewReader(data)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("restore --clean after a cut pipe: %v: %s", err, out)
				}
				pgtest.RequireSameData(t, c.ConnString(src), c.ConnString(dst))
			}
		})
	}

	t.Run("writer killed", func(t *testing.T) {
		killed := pgtest.DB(t, c, "killed")
		d := exec.Command(binary, "dump", "-q", "-Z", "none", "-j", "2", "--chunk-size", "4MB", "-f", "-", "-d", c.ConnString(src))
		dout, err := d.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		r := exec.Command(binary, "restore", "-q", "-f", "-", "-j", "2", "-d", c.ConnString(killed))
		rin, err := r.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		r.Stderr = &stderr
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		// Pass 2 MiB, then kill the dump: the restore sees the pipe end
		// without a trailer.
		if _, err := io.CopyN(rin, dout, 2<<20); err != nil {
			t.Fatal(err)
		}
		d.Process.Kill()
		d.Wait()
		io.Copy(rin, dout)
		rin.Close()
		err = r.Wait()
		res := result{stderr: stderr.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			res.code = ee.ExitCode()
		}
		requireOneLineError(t, res, "incomplete")
	})

	t.Run("reader killed", func(t *testing.T) {
		d := exec.Command(binary, "dump", "-q", "-Z", "none", "-j", "2", "-f", "-", "-d", c.ConnString(src))
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		d.Stdout, d.Stderr = pw, &stderr
		if err := d.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if _, err := io.CopyN(io.Discard, pr, 1<<20); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		err = d.Wait()
		res := result{stderr: stderr.String()}
		if ee, ok := err.(*exec.ExitError); ok {
			res.code = ee.ExitCode()
		}
		requireOneLineError(t, res, "broken pipe")
	})
}
