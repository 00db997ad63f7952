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
// internal/clone): preflight restore and clone name each thing the target
// lacks and the objects that need it, not ready without --keep-going and
// ready with it; restore without --keep-going exits 1 at the first error;
// with it, from a file and from a pipe, and clone with it, exit 1 naming
// every failure with its dependents, and --summary-json lists them.
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

	// Preflight names, before anything runs, each thing the target
	// lacks and the objects that need it: not ready without --keep-going,
	// ready with it, saying what it would leave out.
	requirePreflightLacks(t, file, dst.ConnString("stops"))

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
	requirePreflightCloneLacks(t, src.ConnString("src"), dst.ConnString("cloned"))
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

// requirePreflightLacks checks preflight restore of keepGoingSchema's
// archive (file) into target, which lacks what keepGoingPair's lacks:
// every missing thing is named with the objects that need it; without
// --keep-going it fails, as the restore would; with it, it is ready and
// names what would be left out or created without its owner or
// tablespace.
func requirePreflightLacks(t *testing.T, file, target string) {
	t.Helper()
	r := pgsprint(t, nil, "preflight", "restore", "-f", file, "-d", target)
	t.Logf("preflight restore:\n%s", r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, "not ready") {
		t.Errorf("preflight restore into a target that lacks things: exit %d, want 1 and not ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto", needed by EXTENSION pgcrypto`,
		`✗ target collations: the target lacks collation provider "icu", needed by COLLATION public.icu_und`,
		`✗ target compression: the target lacks compression method "lz4", needed by TABLE app.packed, TABLE DATA app.packed`,
		`✗ target roles: the target lacks role "kg_owner", owner of TABLE app.owned`,
		`✗ target tablespaces: the target lacks tablespace "kg_space", where TABLE app.placed go`,
		"the run would stop at the first",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight restore does not say %q", want)
		}
	}
	r = pgsprint(t, nil, "preflight", "restore", "-f", file, "-d", target, "--keep-going")
	t.Logf("preflight restore --keep-going:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "ready: the run would start") {
		t.Errorf("preflight restore --keep-going: exit %d, want 0 and ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`! target extensions: the target lacks extension "pgcrypto"`, "--keep-going leaves them out, and skips the", "TABLE app.hashed",
		"! target collations:", "TABLE app.sorted", "INDEX app.sorted_name", "VIEW app.sorted_names",
		"! target compression:", "! target roles:", "--keep-going creates them owned by",
		"! target tablespaces:", "--keep-going creates them in the default tablespace",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight restore --keep-going does not say %q", want)
		}
	}
}

// requirePreflightCloneLacks checks preflight clone of keepGoingSchema's
// source into target as requirePreflightLacks does preflight restore: the
// source's schema, read as the clone reads it, says what target lacks.
func requirePreflightCloneLacks(t *testing.T, source, target string) {
	t.Helper()
	r := pgsprint(t, nil, "preflight", "clone", "--source", source, "--target", target)
	t.Logf("preflight clone:\n%s", r.stdout)
	if r.code != 1 || !strings.Contains(r.stdout, "not ready") {
		t.Errorf("preflight clone into a target that lacks things: exit %d, want 1 and not ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto"`, `✗ target collations: the target lacks collation provider "icu"`,
		`✗ target compression: the target lacks compression method "lz4"`, `✗ target roles: the target lacks role "kg_owner"`,
		`✗ target tablespaces: the target lacks tablespace "kg_space"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight clone does not say %q", want)
		}
	}
	r = pgsprint(t, nil, "preflight", "clone", "--source", source, "--target", target, "--keep-going")
	t.Logf("preflight clone --keep-going:\n%s", r.stdout)
	if r.code != 0 || !strings.Contains(r.stdout, "ready: the run would start") {
		t.Errorf("preflight clone --keep-going: exit %d, want 0 and ready\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"! target extensions:", "! target collations:", "! target compression:", "! target roles:", "! target tablespaces:", "TABLE app.sorted"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight clone --keep-going does not say %q", want)
		}
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
