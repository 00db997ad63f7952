package main

import (
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestPackAtSmallScale builds the bench pack as `make bench-pack` does
// (gzip instead of xz, for time), unpacks it and runs its script at scale
// 1 (mixed 0.02, TPC-H SF 0.05) and -j 2, as a many-core machine would at
// its defaults: every step must succeed, every restore and clone must
// match its source, and the results must be written, with the trace of
// every step of mixed and TPC-H (the pack's default TRACE). `make
// test-long` runs it, on all four datasets; `make test` does not.
func TestPackAtSmallScale(t *testing.T) {
	if testing.Short() || len(packDatasets) == 0 {
		t.Skip("builds static binaries and runs the pack: make test-long")
	}
	pgtest.RequireBinaries(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dist, unpacked := t.TempDir(), t.TempDir()
	build := exec.Command(filepath.Join(root, "scripts", "bench-pack.sh"), dist)
	build.Dir, build.Env = root, append(os.Environ(), "PACK_COMPRESS=gzip")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("bench-pack.sh: %v\n%s", err, out)
	}
	tarball := filepath.Join(dist, "bench-pack.tar.gz")
	if info, err := os.Stat(tarball); err != nil || info.Size() > 40<<20 {
		t.Fatalf("tarball %v: %v (at most 40 MiB)", info, err)
	}
	if out, err := exec.Command("tar", "-C", unpacked, "-xzf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	results := filepath.Join(unpacked, "results")
	run := exec.Command(filepath.Join(unpacked, "bench-pack", "run.sh"))
	run.Dir = unpacked
	steps := []string{"raw", "dump", "pgdump-fd", "restore", "pgrestore", "handmade", "clone"}
	run.Env = append(os.Environ(), "SCALE=1", "MIXED=0.02", "TPCH_SF=0.05", "JOBS=2", "OUT="+results,
		"DATASETS="+strings.Join(packDatasets, ","), "STEPS="+strings.Join(steps, ","))
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	md, err := os.ReadFile(filepath.Join(results, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"flat": "pgbench -s 1", "parts": "pgbench -s 1 --partitions=30", "mixed": "mixed, scale 0.02", "tpch": "TPC-H SF 0.05"}
	for _, ds := range packDatasets {
		if title := "### " + names[ds] + " ("; !strings.Contains(string(md), title) {
			t.Errorf("results.md has no table %q:\n%s", title, md)
		}
	}
	f, err := os.Open(filepath.Join(results, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	want, traced := map[string]bool{}, map[string]bool{names["mixed"]: true, names["tpch"]: true}
	for _, ds := range packDatasets {
		if ds == "mixed" || ds == "tpch" {
			if _, err := os.Stat(filepath.Join(results, "trace-"+ds+"-restore-j2-r1.csv")); err != nil {
				t.Errorf("no raw trace of %s's restore: %v", ds, err)
			}
		}
		ds := names[ds]
		for _, step := range []string{"raw COPY limit -j2", "pgsprint dump -j2", "pg_dump -Fd -j2", "pgsprint restore -j2", "pg_restore -j2 + vacuumdb -Z -j2",
			"hand-made restore -j2 + vacuumdb -Z -j2", "pgsprint clone -j2"} {
			want[ds+" / "+step] = true
		}
	}
	for _, r := range recs[1:] {
		key := r[col["dataset"]] + " / " + r[col["step"]]
		if !want[key] {
			t.Errorf("unexpected row %s", key)
			continue
		}
		delete(want, key)
		if e := r[col["error"]]; e != "" {
			t.Errorf("%s failed: %s", key, e)
		}
		if r[col["wall_median_s"]] == "" || r[col["machine_cpu_s"]] == "" {
			t.Errorf("%s: no times: %v", key, r)
		}
		if got := r[col["trace_waits"]] != ""; got != traced[r[col["dataset"]]] {
			t.Errorf("%s: trace %q, want one only for mixed and TPC-H", key, r[col["trace_waits"]])
		}
		restores := strings.Contains(key, "restore ") || strings.Contains(key, "clone")
		if v := r[col["verified"]]; restores && v != "same (1 of 1)" {
			t.Errorf("%s: verified %q, want the copy compared with its source and the same", key, v)
		}
	}
	for key := range want {
		t.Errorf("no row %s", key)
	}
}
