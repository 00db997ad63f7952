package preflight

import (
	"fmt"
	"os"
	"path/filepath"
)

// compressionRatio is the archive's size against the tables' on disk
// that a compressed dump is estimated at: COPY text is typically a little
// smaller than the heap, and zstd and lz4 shrink it 3 to 10 times (see
// BENCHMARKS.md); an uncompressed archive is taken at the heap's size.
const compressionRatio = 4

// ArchiveEstimate is the size an archive of tables occupying raw bytes
// on disk is estimated at.
func ArchiveEstimate(raw int64, compressed bool) int64 {
	if compressed {
		return raw / compressionRatio
	}
	return raw
}

// DiskSpace checks that the file system of dir can take about need
// bytes of what (e.g. "the archive"), without writing anything: it fails
// when the directory cannot be written or holds less than half of need
// (the estimate would have to be more than twice too large for the run to
// fit), and warns when it holds less than need.
func DiskSpace(dir string, need int64, what string) Item {
	name := "disk space in " + dir
	st, err := os.Stat(dir)
	if err != nil {
		return fail(name, fmt.Errorf("%w: create it, or write %s elsewhere", err, what))
	}
	if !st.IsDir() {
		return fail(name, fmt.Errorf("%s is not a directory: write %s elsewhere", dir, what))
	}
	if err := writable(dir); err != nil {
		return fail(name, fmt.Errorf("%s cannot be written (%v): write %s where you may, or fix its permissions", dir, err, what))
	}
	free, ok := freeBytes(dir)
	switch {
	case !ok:
		return pass(name, fmt.Sprintf("writable; free space not measured on this system (%s estimated at %s)", what, bytes(need)))
	case free < need/2:
		return fail(name, fmt.Errorf("%s estimated at %s, but %s has %s free: free space, or write %s elsewhere", what, bytes(need), dir, bytes(free), what))
	case free < need:
		return warn(name, fmt.Sprintf("%s estimated at %s, %s free: it may not fit", what, bytes(need), bytes(free)))
	}
	return pass(name, fmt.Sprintf("%s free, %s estimated at %s", bytes(free), what, bytes(need)))
}

// DirOf is the directory a file named path is created in.
func DirOf(path string) string {
	d := filepath.Dir(path)
	if d == "" {
		return "."
	}
	return d
}

// bytes formats n in binary units.
func bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
