package dump

import "testing"

// TestChunkBlockSize: a small table's chunk gets a block buffer of about
// twice its size (at least 64 KiB), not the dump's 1 MiB; a chunk of a
// quarter of the block size or more gets the full block size.
func TestChunkBlockSize(t *testing.T) {
	const block = 1 << 20
	for _, tc := range []struct {
		estimate int64
		want     int
	}{
		{0, 64 << 10},
		{8192, 64 << 10},
		{32 << 10, 64 << 10},
		{33 << 10, 128 << 10},
		{200 << 10, 448 << 10},
		{block/4 - 1, block / 2},
		{block / 4, block},
		{1 << 30, block},
	} {
		if got := chunkBlockSize(tc.estimate, block); got != tc.want {
			t.Errorf("chunkBlockSize(%d, %d) = %d, want %d", tc.estimate, block, got, tc.want)
		}
	}
	if got := chunkBlockSize(8192, 16<<10); got != 16<<10 {
		t.Errorf("a block size smaller than the minimum is kept: got %d, want %d", got, 16<<10)
	}
}
