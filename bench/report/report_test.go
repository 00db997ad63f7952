package main

import (
	"strings"
	"testing"
)

func TestParseLevels(t *testing.T) {
	got, err := parseLevels("gzip=1,5,9 lz4 none")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || len(got[0].levels) != 3 || got[1].levels[0] != 0 || got[2].method != "none" {
		t.Errorf("%+v", got)
	}
	for _, bad := range []string{"brotli=1", "zstd=x", "gzip=0"} {
		if _, err := parseLevels(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestVariants checks the matrix: every format with none, tar with nothing
// else, every method's levels for the other formats, skips for methods the
// pg_dump lacks, spec syntax by version.
func TestVariants(t *testing.T) {
	levels, _ := parseLevels("gzip=1,5,9 lz4=1,5,12 zstd=1,5,15,22")
	own, _ := parseLevels("zstd=1,3 none")
	s := setup{pg: pgTools{dir: "/pg", major: 17, version: "17.1", supported: map[string]bool{"gzip": true, "zstd": true}},
		jobs: 2, pgsprint: "/x/pgsprint", dumpLevels: levels, ownLevels: own, decompress: map[string]string{"gzip": "/bin/gzip"}}
	count := map[string]int{}
	skips := 0
	for _, v := range s.variants() {
		count[v.row.Format]++
		if v.skip != "" {
			skips++
		}
	}
	// plain/custom/directory: none + 3 gzip + 3 lz4 + 4 zstd; tar: none.
	if count["plain"] != 11 || count["custom"] != 11 || count["directory"] != 11 || count["tar"] != 1 || count["pgsprint"] != 3 || count["pgsprint s3"] != 1 || count["clone"] != 2 {
		t.Errorf("variants per format: %v", count)
	}
	// lz4 x 3 formats x 3 levels, plain zstd x 4 (no zstd command), both
	// clones, s3 (no server).
	if skips != 9+4+2+1 {
		t.Errorf("%d skipped, want 16", skips)
	}
	if got := s.pg.compressionSpec("zstd", 5); got != "zstd:5" {
		t.Errorf("spec %q", got)
	}
	old := pgTools{major: 15}
	if old.compressionSpec("gzip", 5) != "5" || old.compressionSpec("none", 0) != "0" {
		t.Errorf("PostgreSQL 15 specs: %q %q", old.compressionSpec("gzip", 5), old.compressionSpec("none", 0))
	}
	for _, v := range s.variants() {
		if v.row.Format == "directory" && v.row.Compression == "gzip" && v.row.Level == 9 {
			args := strings.Join(v.backup("SRC", "P").Args, " ")
			if args != "/pg/pg_dump -Fd -Z gzip:9 -f P -d SRC -j 2" {
				t.Errorf("directory gzip:9 dump: %s", args)
			}
			if r := strings.Join(v.restore("P", "DST")[0].Args, " "); r != "/pg/pg_restore -j 2 -d DST P" {
				t.Errorf("restore: %s", r)
			}
		}
	}
}
