// Package layout holds no code: its test checks the tree's imports
// against the map that opens docs/ARCHITECTURE.md, so that the map a
// newcomer reads first stays true.
package layout

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/pgsprint/pgsprint/"

// TestImportMap reads the map of docs/ARCHITECTURE.md (its first fenced
// block: one line of packages per layer, from the top) and checks, with
// go list, that every package of the tree is on it, that each imports
// only packages to its right on its line or on the lines below, and that
// no product package depends on a test-only one (the last line, tests:),
// even through another (go list -deps).
func TestImportMap(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rank, tests := readMap(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	imports := goList(t, root, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./internal/...", "./cmd/...")
	for _, line := range imports {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		pkg = strings.TrimPrefix(pkg, "internal/")
		if tests[pkg] {
			continue
		}
		r, ok := rank[pkg]
		if !ok {
			t.Errorf("package %s is not on the map of docs/ARCHITECTURE.md: add it to its layer", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(strings.TrimPrefix(imp, module), "internal/")
			switch {
			case tests[dep]:
				t.Errorf("%s imports %s, a test-only package", pkg, dep)
			case rank[dep] <= r:
				t.Errorf("%s imports %s, which the map of docs/ARCHITECTURE.md puts above it or to its left", pkg, dep)
			}
		}
	}
	for _, dep := range goList(t, root, "-deps", "./cmd/pgsprint") {
		if d := strings.TrimPrefix(strings.TrimPrefix(dep, module), "internal/"); tests[d] {
			t.Errorf("the pgsprint binary depends on the test-only package %s", d)
		}
	}
}

// readMap reads the map: each product package's rank (its order, top
// line first, left to right) and the test-only packages.
func readMap(t *testing.T, doc string) (rank map[string]int, tests map[string]bool) {
	t.Helper()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rank, tests = map[string]int{}, map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if in {
				break
			}
			in = true
			continue
		}
		if !in {
			continue
		}
		layer, pkgs, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: map line %q has no layer: name: packages", doc, line)
		}
		for _, p := range strings.Fields(pkgs) {
			if layer == "tests" {
				tests[p] = true
			} else {
				rank[p] = len(rank)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rank) == 0 || len(tests) == 0 {
		t.Fatalf("%s: no map (a fenced block of layer: packages lines, tests: last) found", doc)
	}
	return rank, tests
}

// goList runs go list in root with args and returns its lines.
func goList(t *testing.T, root string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", slices.Concat([]string{"list"}, args)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
