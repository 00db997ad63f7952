package main

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDemoBinaryHasNoHarness checks that the pgsprint binary carries no test
// harness: `pgsprint demo` starts its cluster through internal/pgctl, so
// neither the testing package, nor internal/pgtest, nor the torture SQL it
// embeds may be linked into the product.
func TestDemoBinaryHasNoHarness(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/pgsprint/pgsprint/internal/demo") {
		t.Fatalf("go list -deps printed %d packages without internal/demo; the check below would prove nothing:\n%s", len(deps), out)
	}
	for _, banned := range []string{"testing", "github.com/pgsprint/pgsprint/internal/pgtest"} {
		if slices.Contains(deps, banned) {
			t.Errorf("pgsprint links %s", banned)
		}
	}

	// The torture script's opening, as embedded: present in this test
	// binary (which links pgtest), absent from the product.
	marker := []byte(pgtest.TortureSQL()[:200])
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{{self, true}, {binary, false}} {
		b, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, marker); got != tc.want {
			t.Errorf("%s contains the torture SQL = %v, want %v", tc.path, got, tc.want)
		}
	}
}
