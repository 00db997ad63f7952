package preflight

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/verdict"
)

// TestChecklist: a checklist prints one line per item (✓, !, ✗ with the
// error on one line) and a verdict; it is OK, and Failed nil, only when no
// item failed.
func TestChecklist(t *testing.T) {
	t.Parallel()
	c := &Checklist{}
	c.add(verdict.Pass("a", "fine"), verdict.Warn("b", "maybe"))
	if !c.OK() || verdict.Failed(c.Items) != nil {
		t.Errorf("a checklist without failures is not OK")
	}
	c.add(verdict.Fail("c", errors.New("broken\nsecond line: fix it")))
	if c.OK() || verdict.Failed(c.Items) == nil {
		t.Errorf("a checklist with a failure is OK")
	}
	var b strings.Builder
	if err := c.Print(&b); err != nil {
		t.Fatal(err)
	}
	want := "✓ a: fine\n! b: maybe\n✗ c: broken; second line: fix it\nnot ready: 1 of 3 checks failed\n"
	if b.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
	}
}
