package results

import (
	"bytes"
	"context"
	"encoding/csv"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeRows is a tiny result set with every kind of row: pg_dump formats,
// pgsprint, a clone, a failure and a skip.
func fakeRows() []Row {
	const db = 100 << 20
	row := func(tool, format, comp string, level int, b, r float64, size int64) Row {
		return Row{Dataset: "pgbench -s 1", Tool: tool, Format: format, Compression: comp, Level: level,
			BackupSeconds: b, RestoreSeconds: r, BackupBytes: size, DatabaseBytes: db, RestoredBytes: db + 1<<20,
			BackupCPU: b / 2, RestoreCPU: r / 3, PeakRSS: 30 << 20, Status: StatusVerified}
	}
	rows := []Row{
		row("pg_dump", "plain", "none", 0, 3.1, 9.5, 60<<20),
		row("pg_dump", "custom", "gzip", 5, 6.2, 8.1, 12<<20),
		row("pg_dump", "directory", "zstd", 5, 4.0, 7.2, 8<<20),
		row("pg_dump", "tar", "none", 0, 3.3, 9.9, 61<<20),
		row("pgsprint", "pgsprint", "zstd", 1, 1.9, 4.1, 9<<20),
		{Dataset: "pgbench -s 1", Tool: "pgsprint clone", Format: "clone", RestoreSeconds: 5.5, DatabaseBytes: db, RestoredBytes: db, Status: StatusVerified},
		{Dataset: "pgbench -s 1", Tool: "pg_dump", Format: "custom", Compression: "lz4", Level: 12, Status: "failed: restore: exit status 1"},
		{Dataset: "mixed", Tool: "pgcopydb clone", Format: "clone", Status: "skipped: pgcopydb is not installed"},
	}
	m := row("pg_dump", "custom", "zstd", 22, 30, 7, 5<<20)
	m.Dataset = "mixed"
	return append(rows, m)
}

func fakeMeta() Meta {
	return Meta{Title: "pgsprint benchmark <test>", Started: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC), Size: "quick", Scale: 0.1, Jobs: 2,
		Machine: "2 CPUs", Load: "min 1, mean 2, max 3", Server: "PostgreSQL 18.6", PgDump: "18.6",
		Datasets: map[string]string{"mixed": "three tables"}, SortOrder: []string{"pgbench -s 1", "mixed"}}
}

func TestCSVColumns(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCSV(&b, fakeRows()); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(fakeRows())+1 {
		t.Fatalf("%d records", len(recs))
	}
	want := "format,compression,level,backup_seconds,restore_seconds,total_seconds,backup_bytes,database_bytes,restored_database_bytes,size_ratio"
	if got := strings.Join(recs[0], ","); !strings.HasPrefix(got, want) || !strings.Contains(got, "client_cpu_seconds,peak_rss_bytes") {
		t.Errorf("header %s", got)
	}
	if recs[2][3] != "6.200" || recs[2][9] != "0.1200" || recs[7][3] != "" {
		t.Errorf("rows %v / %v", recs[2], recs[7])
	}
}

func TestPicks(t *testing.T) {
	got := map[string]string{}
	for _, p := range Picks(of(fakeRows(), "pgbench -s 1")) {
		got[p.Need] = p.Row.Label()
	}
	want := map[string]string{"fastest backup": "pgsprint zstd:1", "smallest file": "directory zstd:5",
		"fastest restore": "pgsprint zstd:1", "fastest pg_dump backup + restore": "directory zstd:5",
		"fastest copy to another database": "pgsprint clone"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

// TestPageRendersInChromium writes the page for the fake rows and has
// headless Chromium render it: the DOM must hold every chart and bar, and
// a screenshot must not be blank. Set PGSPRINT_SCREENSHOT to keep the PNG.
func TestPageRendersInChromium(t *testing.T) {
	dir := t.TempDir()
	if err := WriteAll(dir, fakeMeta(), fakeRows()); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	// 4 charts for pgbench; mixed has one verified row: 4 charts.
	if n := strings.Count(string(page), "<svg"); n != 8 {
		t.Errorf("%d charts in the page, want 8", n)
	}
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("skipping the browser check: no chromium on PATH (Debian: apt-get install chromium, or make bench-deps)")
	}
	url := "file://" + filepath.Join(dir, HTMLFile)
	dom := chromium(t, browser, "--dump-dom", url)
	if n := strings.Count(dom, "<svg"); n != 8 {
		t.Errorf("rendered DOM has %d <svg> charts, want 8", n)
	}
	// bars: pgbench 5 + 5 + 6 + 5 (failed row left out), mixed 4.
	if n := strings.Count(dom, `class="bar"`); n != 25 {
		t.Errorf("rendered DOM has %d bars, want 25", n)
	}
	shot := filepath.Join(dir, "page.png")
	chromium(t, browser, "--screenshot="+shot, "--window-size=1200,2000", url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colored, dark, total := 0, 0, 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			total++
			if r < 0x4000 && g < 0x4000 && b < 0x4000 {
				dark++ // text
			}
			if max(r, g, b)-min(r, g, b) > 0x3000 {
				colored++ // bars
			}
		}
	}
	t.Logf("screenshot %dx%d: %.1f%% colored, %.1f%% dark pixels", bounds.Dx(), bounds.Dy(), 100*float64(colored)/float64(total), 100*float64(dark)/float64(total))
	if float64(colored)/float64(total) < 0.005 || float64(dark)/float64(total) < 0.002 {
		t.Errorf("screenshot looks blank: %d colored and %d dark of %d sampled pixels", colored, dark, total)
	}
	if keep := os.Getenv("PGSPRINT_SCREENSHOT"); keep != "" {
		data, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(keep, data, 0o644)
		}
		if err != nil {
			t.Errorf("keep screenshot: %v", err)
		}
	}
}

// chromium runs headless Chromium with args and returns its stdout.
func chromium(t *testing.T, browser string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", browser, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
