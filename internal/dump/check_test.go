package dump

import (
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
			warning, detail, err := DiskSpace(tc.dir, tc.need, "the archive")
			t.Logf("warning %v, %q, %v", warning, detail, err)
			switch {
			case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
				t.Errorf("want a failure with %q, got %v", tc.fail, err)
			case tc.fail == "" && err != nil:
				t.Errorf("want no failure, got %v", err)
			case warning != tc.warning:
				t.Errorf("warning %v, want %v", warning, tc.warning)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %d entries (%v), want only the test's file", len(entries), err)
	}
}

// TestVolumeArchive: compressed, the heap is divided by the ratio and
// TOAST is not (issue 42: 16 KiB of heap and 6.6 MB of TOAST were
// estimated at 4 KiB); uncompressed, both count whole.
func TestVolumeArchive(t *testing.T) {
	t.Parallel()
	v := Volume{Heap: 16 << 10, Toast: 6600 << 10}
	if got, want := v.Archive(true), int64(4<<10+6600<<10); got != want {
		t.Errorf("compressed: %d, want %d", got, want)
	}
	if got, want := v.Archive(false), int64(16<<10+6600<<10); got != want {
		t.Errorf("uncompressed: %d, want %d", got, want)
	}
	if got := v.Add(v); got != (Volume{Heap: 2 * v.Heap, Toast: 2 * v.Toast}) {
		t.Errorf("Add: %+v", got)
	}
}
