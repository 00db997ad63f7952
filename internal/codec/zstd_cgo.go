//go:build cgo && !pgsprint_purego

package codec

import (
	"fmt"
	"sync"

	czstd "github.com/DataDog/zstd"
)

// zstdEngine names the zstd compressor this build uses, for reports.
const zstdEngine = "libzstd (cgo)"

// zstdModule is the Go module that brings the compressor: its version is
// the bundled libzstd's.
const zstdModule = "github.com/DataDog/zstd"

// zstdAutoLevels are the levels ZstdAuto climbs, lowest first. libzstd
// has every level; it stops at 9, above which each level's search is
// far slower and its context's tables larger, for little gain on COPY
// text (pg_dump -Fc's gzip 6 is about zstd 6's size).
func zstdAutoLevels() []int { return []int{1, 2, 3, 4, 5, 6, 7, 8, 9} }

// cZstd compresses with the reference C libzstd, built from the source
// that github.com/DataDog/zstd bundles (only a C compiler is needed). On
// pgsprint's dump path it is about twice as fast as the pure Go encoder at
// a smaller output (docs/ARCHITECTURE.md has the numbers). Each C context
// holds its own match state and is not safe for concurrent use, so they
// are pooled: at most one per concurrently compressing worker.
type cZstd struct {
	level int
	pool  sync.Pool
}

func newZstdCompressor(level int) zstdCompressor {
	c := &cZstd{level: level}
	c.pool.New = func() any { return czstd.NewCtx() }
	return c
}

// compress writes one complete zstd frame for src into dst's storage.
func (c *cZstd) compress(dst, src []byte) ([]byte, error) {
	ctx := c.pool.Get().(czstd.Ctx)
	defer c.pool.Put(ctx)
	out, err := ctx.CompressLevel(dst[:0], src, c.level)
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return out, nil
}
