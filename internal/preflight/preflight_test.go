package preflight

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiskSpace: a directory that does not exist or is a file fails with
// the fix; an archive estimated at three times the free space fails, at
// one and a half times it warns, at a tenth of it passes; nothing is
// written in the directory.
func TestDiskSpace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	free, ok := freeBytes(dir)
	if !ok || free < 1<<20 {
		t.Skipf("free space of %s not measurable or under 1 MiB (%d)", dir, free)
	}
	for _, tc := range []struct {
		name    string
		dir     string
		need    int64
		fail    string
		warning bool
	}{
		{"missing", filepath.Join(dir, "none"), 1, "no such file or directory: create it", false},
		{"a file", file, 1, "is not a directory: write the archive elsewhere", false},
		{"three times the free space", dir, 3 * free, "free space, or write the archive elsewhere", false},
		{"one and a half times", dir, free + free/2, "", true},
		{"a tenth", dir, free / 10, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := DiskSpace(tc.dir, tc.need, "the archive")
			t.Logf("%+v", it)
			switch {
			case tc.fail != "" && (it.Err == nil || !strings.Contains(it.Err.Error(), tc.fail)):
				t.Errorf("want a failure with %q, got %+v", tc.fail, it)
			case tc.fail == "" && it.Err != nil:
				t.Errorf("want no failure, got %v", it.Err)
			case it.Warning != tc.warning:
				t.Errorf("warning %v, want %v", it.Warning, tc.warning)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %d entries (%v), want only the test's file", len(entries), err)
	}
}

// TestChecklist: a checklist prints one line per item (✓, !, ✗ with the
// error on one line) and a verdict; it is OK, and Failed nil, only when no
// item failed.
func TestChecklist(t *testing.T) {
	t.Parallel()
	c := &Checklist{}
	c.add(pass("a", "fine"), warn("b", "maybe"))
	if !c.OK() || Failed(c.Items) != nil {
		t.Errorf("a checklist without failures is not OK")
	}
	c.add(fail("c", errors.New("broken\nsecond line: fix it")))
	if c.OK() || Failed(c.Items) == nil {
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
