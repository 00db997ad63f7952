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
