package codec

import (
	"fmt"
	"sync"

	"github.com/pierrec/lz4/v4"
)

// lz4Codec writes raw LZ4 blocks (no LZ4 frame format: the archive frame
// already carries lengths and checksums). Level 1, the default, uses the
// fast compressor; levels 2..9 use the high-compression one with that
// search depth.
//
// The compressors are not safe for concurrent use and hold sizeable hash
// tables, so each codec pools them instead of allocating per block.
type lz4Codec struct {
	level int
	pool  sync.Pool
}

// lz4Compressor is what the pool holds: one of the two compressor kinds.
type lz4Compressor interface {
	CompressBlock(src, dst []byte) (int, error)
}

func newLZ4(level int) *lz4Codec {
	if level == 0 {
		level = 1
	}
	c := &lz4Codec{level: level}
	c.pool.New = func() any {
		if level <= 1 {
			return new(lz4.Compressor)
		}
		// lz4.Level2..Level9 are 1<<10..1<<17: a search depth.
		return &lz4.CompressorHC{Level: lz4.CompressionLevel(1 << (8 + level))}
	}
	return c
}

// Name implements Codec.
func (c *lz4Codec) Name() string { return "lz4" }

// Level implements Codec.
func (c *lz4Codec) Level() int { return c.level }

// Compress always gives the compressor a CompressBlockBound-sized buffer,
// which makes it succeed even on incompressible input (it then emits one
// literal run, slightly longer than src). The archive writer, not this
// codec, decides to store such blocks uncompressed.
func (c *lz4Codec) Compress(dst, src []byte) ([]byte, error) {
	if err := checkSrcLen("lz4", len(src)); err != nil {
		return nil, err
	}
	if len(src) == 0 {
		return dst[:0], nil
	}
	dst = sized(dst, lz4.CompressBlockBound(len(src)))
	comp := c.pool.Get().(lz4Compressor)
	n, err := comp.CompressBlock(src, dst)
	c.pool.Put(comp)
	if err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	if n == 0 {
		// Documented not to happen with a bound-sized buffer; refuse
		// rather than write a block nobody can decode.
		return nil, fmt.Errorf("lz4: compressor produced no output for %d bytes", len(src))
	}
	return dst[:n], nil
}

// Decompress decodes one raw LZ4 block into exactly rawLen bytes; the
// decoder bounds-checks every copy, so damaged input fails cleanly.
func (c *lz4Codec) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	if out, done, err := startDecompress("lz4", dst, src, rawLen); done {
		return out, err
	}
	out := sized(dst, rawLen)
	n, err := lz4.UncompressBlock(src, out)
	if err != nil {
		return nil, fmt.Errorf("lz4: %w", err)
	}
	if n != rawLen {
		return nil, fmt.Errorf("lz4: decompressed %d bytes, want %d", n, rawLen)
	}
	return out, nil
}
