package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// progressDB makes a small database whose dump and restore take long
// enough for a few progress lines at a 50ms interval.
func progressDB(t *testing.T) (*sharedInstance, string) {
	t.Helper()
	ctx := context.Background()
	c := shared(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	err := c.Exec(ctx, "src", `
		CREATE TABLE big (id int PRIMARY KEY, s text);
		INSERT INTO big SELECT i, repeat(md5(i::text), 4) FROM generate_series(1, 300000) i;
		CREATE TABLE "Small ""one""" (id int PRIMARY KEY REFERENCES big, v text);
		INSERT INTO "Small ""one""" SELECT i, 'x' FROM generate_series(1, 1000) i;
		CREATE INDEX ON big (s);
		SELECT lo_from_bytea(0, 'hello');
		ANALYZE`)
	if err != nil {
		t.Fatal(err)
	}
	return c, "src"
}

// TestProgress: progress lines when stderr is not a terminal, JSON events
// that parse and add up, the summary on stderr and in --summary-json, and
// silence with -q.
func TestProgress(t *testing.T) {
	t.Parallel()
	c, src := progressDB(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "p.pgs")

	t.Run("lines", func(t *testing.T) {
		r := mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", file, "-j", "1", "--chunk-size", "2MB",
			"--progress-interval", "20ms")
		line := regexp.MustCompile(`(?m)^dump [0-9.]+m?s: (catalog|data|finish), .* rows, .*chunks \d+/\d+`)
		if !line.MatchString(r.stderr) {
			t.Errorf("no progress line in:\n%s", r.stderr)
		}
		for _, want := range []string{"dumped 2 tables in ", "301,000", "data:", "raw", "stored (zstd", "phase", `largest: "public"."big"`} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("summary lacks %q:\n%s", want, r.stderr)
			}
		}
	})

	t.Run("json dump", func(t *testing.T) {
		sum := filepath.Join(dir, "dump.json")
		r := mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", file, "-j", "2", "--chunk-size", "2MB",
			"--progress=json", "--progress-interval", "20ms", "--summary-json", sum)
		evs := events(t, r.stderr)
		counts := map[string]int{}
		var rows int64
		for _, e := range evs {
			counts[e.Event]++
			if e.Event == "table" {
				rows += e.Rows
			}
		}
		if evs[0].Event != "phase" || counts["start"] != 1 || counts["summary"] != 1 || counts["phase"] != 3 {
			t.Errorf("events: %v", counts)
		}
		if counts["table"] < 3 || rows != 301000 {
			t.Errorf("%d table events adding up to %d rows, want several and 301000", counts["table"], rows)
		}
		if counts["progress"] == 0 {
			t.Error("no progress ticks")
		}
		last := evs[len(evs)-1]
		if last.Event != "summary" || last.Summary.Rows != 301000 || last.Summary.StoredBytes == 0 {
			t.Errorf("last event %+v", last)
		}
		var s progress.Summary
		b, err := os.ReadFile(sum)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s.Rows != 301000 || s.Tables != 2 || s.LargeObj != 1 || len(s.Largest) == 0 || s.Largest[0].Table != `"public"."big"` {
			t.Errorf("summary file: %+v", s)
		}
	})

	t.Run("json restore", func(t *testing.T) {
		if err := c.CreateDB(context.Background(), "dst"); err != nil {
			t.Fatal(err)
		}
		// A killed run's temporary file, which this run removes and logs:
		// under --progress=json the log line is JSON too.
		tmp := t.TempDir()
		gone := exec.Command("true")
		if err := gone.Run(); err != nil {
			t.Fatal(err)
		}
		stale := filepath.Join(tmp, fmt.Sprintf("pgsprint-schema-%d-1.dump", gone.Process.Pid))
		if err := os.WriteFile(stale, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, []string{"TMPDIR=" + tmp}, "restore", "-f", file, "-d", c.ConnString("dst"), "-j", "2",
			"--progress=json", "--progress-interval", "20ms")
		if r.code != 0 {
			t.Fatalf("restore: exit %d\n%s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, `"msg":"removed a stale temporary file left by a killed run"`) {
			t.Errorf("no JSON line for the removed stale file:\n%s", r.stderr)
		}
		counts := map[string]int{}
		var last progress.Event
		for _, e := range events(t, r.stderr) {
			counts[e.Event]++
			last = e
		}
		if counts["step"] < 3 || counts["table"] < 3 || counts["start"] != 1 {
			t.Errorf("events: %v", counts)
		}
		if last.Summary == nil || last.Summary.Rows != 301000 || len(last.Summary.Phases) < 4 {
			t.Errorf("summary: %+v", last.Summary)
		}
	})

	t.Run("json clone", func(t *testing.T) {
		// A live source has no totals until its COPYs end: the plan
		// carries the catalog's estimate, so that progress shows a size
		// and an ETA (a 12 GiB clone showed neither for 4 minutes).
		if err := c.CreateDB(context.Background(), "clone_dst"); err != nil {
			t.Fatal(err)
		}
		r := mustPgsprint(t, "clone", "--source", c.ConnString(src), "--target", c.ConnString("clone_dst"), "-j", "2",
			"--chunk-size", "2MB", "--progress=json", "--progress-interval", "20ms")
		var plan *progress.Expected
		var last *progress.State
		for _, e := range events(t, r.stderr) {
			if e.Event == "start" {
				plan = e.Expected
			}
			if e.Event == "progress" && e.State != nil {
				last = e.State
			}
		}
		if plan == nil || plan.Op != "clone" || !plan.Estimated || plan.Bytes < 10<<20 || plan.Rows < 250000 {
			t.Fatalf("clone's plan %+v: want an estimate of about 300,000 rows and tens of MB", plan)
		}
		if last == nil || last.BytesTotal == 0 {
			t.Errorf("last progress state %+v: no total", last)
		}
		if last != nil && last.Chunks == last.ChunksAll && last.BytesTotal != last.Bytes {
			t.Errorf("every chunk done, total %d is not the %d bytes moved", last.BytesTotal, last.Bytes)
		}
	})

	t.Run("list from stdin", func(t *testing.T) {
		want := mustPgsprint(t, "list", "--json", file).stdout
		for _, args := range [][]string{{"list", "--json", "-"}, {"list", "-"}} {
			cmd := exec.Command(binary, args...)
			in, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdin = in
			out, err := cmd.Output()
			in.Close()
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if args[1] == "--json" && string(out) != want {
				t.Errorf("list - differs from list FILE:\n%s\nwant:\n%s", out, want)
			}
			if !strings.Contains(string(out), "301000") && !strings.Contains(string(out), "300000") {
				t.Errorf("%v lacks row counts:\n%s", args, out)
			}
		}
		cmd := exec.Command(binary, "list", "-")
		cmd.Stdin = strings.NewReader("PGSPRINT truncated")
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("list of a damaged stream succeeded:\n%s", out)
		}
	})

	t.Run("bars in tmux", func(t *testing.T) { testBarsInTmux(t, c, src) })

	t.Run("quiet", func(t *testing.T) {
		r := mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", file, "-q", "--progress-interval", "10ms")
		if r.stderr != "" {
			t.Errorf("-q printed:\n%s", r.stderr)
		}
	})
}

// testBarsInTmux runs a dump in a tmux pane, as on a terminal, and checks
// the bars it leaves on the screen with the summary below them.
func testBarsInTmux(t *testing.T, c dbServer, src string) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	dir := t.TempDir()
	session := "pgsprint-test-" + filepath.Base(dir)
	script := filepath.Join(dir, "run.sh")
	done := filepath.Join(dir, "done")
	body := "#!/bin/sh\n" + shellQuote(binary) + " dump -d " + shellQuote(c.ConnString(src)) + " -f " +
		shellQuote(filepath.Join(dir, "t.pgs")) + " -j 2 --chunk-size 2MB; touch " + shellQuote(done) + "; sleep 60\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "30", script).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	defer exec.Command("tmux", "kill-session", "-t", session).Run()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("dump in tmux did not finish")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err := exec.Command("tmux", "capture-pane", "-p", "-t", session).Output()
	if err != nil {
		t.Fatal(err)
	}
	screen := string(out)
	t.Logf("screen:\n%s", screen)
	for _, re := range []string{
		`pgsprint dump · finish`,
		`data\s+\[=+\]\s+\d+\.\d MiB of ~\d+\.\d MiB \(100%\)`,
		`rows\s+\[=+\]\s+301,000 of ~301,000`,
		`chunks\s+\[=+\]\s+\d+/\d+`,
		`dumped 2 tables in \d+ chunks`,
		`largest: "public"\."big"`,
	} {
		if !regexp.MustCompile(re).MatchString(screen) {
			t.Errorf("screen lacks %s", re)
		}
	}
}

// TestVersion: --version, -V and `version` name pgsprint's version, the
// commit and build date stamped with -ldflags (as make build does), the
// Go version, the zstd compressor linked in, and the pg_dump it found.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--version"}, {"-V"}, {"version"}} {
		r := mustPgsprint(t, args...)
		lines := strings.Split(r.stdout, "\n")
		want := []string{
			"pgsprint " + version,
			"commit:  " + testCommit,
			"built:   " + testBuildDate + " with " + runtime.Version() + " for " + runtime.GOOS + "/" + runtime.GOARCH,
			"zstd:    " + codec.ZstdLinked(),
		}
		if len(lines) < len(want)+1 || !slices.Equal(lines[:len(want)], want) || !strings.Contains(r.stdout, "pg_dump") {
			t.Errorf("%v printed %q, want it to start with %q and name pg_dump", args, r.stdout, want)
		}
	}
	if !regexp.MustCompile(`, github\.com/\S+ v\d`).MatchString(codec.ZstdLinked()) {
		t.Errorf("the zstd line names no module version: %q", codec.ZstdLinked())
	}
}
