package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestKeepGoing checks what only the binary does with --keep-going, on
// the source and target of pgtest.KeepGoingPair (what the runs restore is
// checked by TestKeepGoing in internal/restore and TestKeepGoingClone in
// internal/clone): preflight restore and clone see what the target
// lacks, not ready without --keep-going and ready with it; restore
// without --keep-going exits 1 at the first error; with it, from a file
// and from a pipe, and clone with it, exit 1 naming every failure with
// its dependents, and --summary-json lists them.
func TestKeepGoing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := pgtest.KeepGoingPair(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "kg.pgs")
	mustPgsprint(t, "dump", "-d", src.ConnString("src"), "-f", file, "-j", "2", "-q")
	for _, db := range []string{"kg", "stops", "piped", "cloned"} {
		if err := dst.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}

	// Preflight reads, before anything runs, what the target lacks: not
	// ready without --keep-going, ready with it.
	requirePreflight(t, "restore", "-f", file, "-d", dst.ConnString("stops"))

	// The default stops at the first error.
	r := pgsprint(t, nil, "restore", "-f", file, "-d", dst.ConnString("stops"), "-j", "2", "-q")
	if r.code != 1 {
		t.Fatalf("restore without --keep-going: exit %d, want 1\n%s", r.code, r.stderr)
	}

	summary := filepath.Join(dir, "summary.json")
	r = pgsprint(t, nil, "restore", "-f", file, "-d", dst.ConnString("kg"), "-j", "2", "--keep-going", "--summary-json", summary)
	t.Logf("restore --keep-going:\n%s", r.stderr)
	if r.code != 1 {
		t.Fatalf("restore --keep-going: exit %d, want 1", r.code)
	}
	for _, want := range []string{
		`EXTENSION pgcrypto`, `COLLATION public.icu_und`, `TABLE app.packed`, `lz4`,
		`skipped because of it: `, `TABLE app.sorted`, `TABLE app.hashed`, `kg_space`, `kg_owner`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the end of the run does not name %q", want)
		}
	}
	if len(summaryFailures(t, summary)) == 0 {
		t.Errorf("--summary-json has no failures")
	}

	// From a pipe and in a clone likewise.
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r = pgsprintStdin(t, nil, f, "restore", "-f", "-", "-d", dst.ConnString("piped"), "-j", "2", "--keep-going", "-q")
	if r.code != 1 || !strings.Contains(r.stderr, "restore incomplete: 3 objects failed") {
		t.Errorf("restore -f - --keep-going: exit %d, want 1 and 3 failures\n%s", r.code, r.stderr)
	}
	requirePreflight(t, "clone", "--source", src.ConnString("src"), "--target", dst.ConnString("cloned"))
	r = pgsprint(t, nil, "clone", "--source", src.ConnString("src"), "--target", dst.ConnString("cloned"), "-j", "2", "--keep-going")
	if r.code != 1 || !strings.Contains(r.stderr, "failed: COLLATION public.icu_und") {
		t.Errorf("clone --keep-going: exit %d, want 1 and the collation named\n%s", r.code, r.stderr)
	}
	if got, want := pgtest.Relations(t, dst.ConnString("piped")), pgtest.Relations(t, dst.ConnString("kg")); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the restore from a pipe holds %v, the restore from the file %v", got, want)
	}
	pgtest.RequireRestoredRows(t, src.ConnString("src"), dst.ConnString("piped"))
}

// summaryFailures reads --summary-json's failures: the objects that
// failed, each with the objects skipped because of it.
func summaryFailures(t *testing.T, file string) map[string][]string {
	t.Helper()
	var s struct {
		Failures []struct {
			Object  string   `json:"object"`
			Error   string   `json:"error"`
			Skipped []string `json:"skipped"`
		} `json:"failures"`
	}
	if b, err := os.ReadFile(file); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range s.Failures {
		if f.Error == "" {
			t.Errorf("--summary-json names %s without its error", f.Object)
		}
		out[f.Object] = f.Skipped
	}
	return out
}

// requirePreflight checks that `pgsprint preflight` with args (restore
// or clone into a target that lacks what pgtest.KeepGoingPair's lacks)
// reads the schema it would create: not ready (exit 1) naming the
// missing collation provider, and ready (exit 0) with --keep-going,
// warning of it. What each check says is TestKeepGoingClone's
// (internal/clone).
func requirePreflight(t *testing.T, args ...string) {
	t.Helper()
	r := pgsprint(t, nil, append([]string{"preflight"}, args...)...)
	t.Logf("preflight %s:\n%s", args[0], r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, "not ready") || !strings.Contains(r.stdout, `✗ target collations: the target lacks collation provider "icu"`) {
		t.Errorf("preflight %s into a target that lacks things: exit %d, want 1, not ready and the ICU provider named\n%s%s", args[0], r.code, r.stdout, r.stderr)
	}
	r = pgsprint(t, nil, append(append([]string{"preflight"}, args...), "--keep-going")...)
	t.Logf("preflight %s --keep-going:\n%s", args[0], r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "ready: the run would start") || !strings.Contains(r.stdout, "! target collations:") {
		t.Errorf("preflight %s --keep-going: exit %d, want 0, ready and the collations a warning\n%s%s", args[0], r.code, r.stdout, r.stderr)
	}
}

// TestKeepGoingNotWithAll: --keep-going with --all is refused as a usage
// error until the whole-server run carries it, rather than ignored.
func TestKeepGoingNotWithAll(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"restore", "--all", "--keep-going", "-f", "nowhere.pgs", "-d", "host=/nonexistent"},
		{"restore", "--database", "x", "--keep-going", "-f", "nowhere.pgs", "-d", "host=/nonexistent"},
		{"clone", "--all", "--keep-going", "--source", "host=/nonexistent", "--target", "host=/nonexistent2"},
	} {
		r := pgsprint(t, nil, args...)
		checkOneError(t, r.code, 2, r.stderr, "--keep-going is not supported with")
	}
}
