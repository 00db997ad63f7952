package codec

import (
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdDefaultLevel is zstd's own default, a good speed/ratio balance for
// COPY text.
const zstdDefaultLevel = 3

// zstdCodec shares one Encoder and one Decoder among all goroutines: their
// EncodeAll and DecodeAll are safe for concurrent use and keep a bounded
// set of internal state objects, so memory does not grow with the number
// of workers. Both are created on first use, because a restore never needs
// the encoder and a dump rarely needs the decoder.
type zstdCodec struct {
	level int
	// c is the C libzstd compressor in a cgo build, nil in a pure Go one
	// (then enc compresses). Decompression always uses klauspost's
	// decoder, which bounds its memory by the frame's raw length.
	c zstdCompressor

	encOnce sync.Once
	enc     *zstd.Encoder
	encErr  error

	decOnce sync.Once
	dec     *zstd.Decoder
	decErr  error
}

func newZstd(level int) *zstdCodec {
	if level == 0 {
		level = zstdDefaultLevel
	}
	return &zstdCodec{level: level, c: newZstdCompressor(level)}
}

// zstdCompressor is an alternative zstd encoder; its output is standard
// zstd frames, so archives do not depend on which build wrote them.
type zstdCompressor interface {
	compress(dst, src []byte) ([]byte, error)
}

// ZstdEngine names the zstd compressor of this build: C libzstd through
// cgo by default, klauspost/compress when built with CGO_ENABLED=0 or the
// pgsprint_purego tag. Benchmarks print it so numbers say what they measured.
const ZstdEngine = zstdEngine

// ZstdLinked is ZstdEngine with the version of the module that brings it
// (DataDog/zstd's is the libzstd it bundles), as the binary records it:
// what `pgsprint --version` shows, so that a report names the compressor
// exactly.
func ZstdLinked() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == zstdModule {
				if m.Replace != nil {
					m = m.Replace
				}
				return fmt.Sprintf("%s, %s %s", zstdEngine, m.Path, m.Version)
			}
		}
	}
	return zstdEngine
}

// Name implements Codec.
func (z *zstdCodec) Name() string { return "zstd" }

// Level implements Codec; it is the zstd level asked for, which the
// encoder maps to the nearest of its four speed settings.
func (z *zstdCodec) Level() int { return z.level }

func (z *zstdCodec) encoder() (*zstd.Encoder, error) {
	z.encOnce.Do(func() {
		z.enc, z.encErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(z.level)))
		if z.encErr != nil {
			z.encErr = fmt.Errorf("zstd: creating encoder: %w", z.encErr)
		}
	})
	return z.enc, z.encErr
}

func (z *zstdCodec) decoder() (*zstd.Decoder, error) {
	z.decOnce.Do(func() {
		z.dec, z.decErr = zstd.NewReader(nil,
			// One block decoder per CPU: DecodeAll calls beyond that
			// wait for a free one instead of allocating more state.
			zstd.WithDecoderConcurrency(0),
			// Never decode more than a block may hold, whatever a
			// corrupted frame header claims.
			zstd.WithDecoderMaxMemory(MaxBlockSize),
			// Decode at most cap(dst)-len(dst) bytes; Decompress sets
			// cap(dst) to exactly rawLen.
			zstd.WithDecodeAllCapLimit(true))
		if z.decErr != nil {
			z.decErr = fmt.Errorf("zstd: creating decoder: %w", z.decErr)
		}
	})
	return z.dec, z.decErr
}

// Compress encodes src as one zstd frame with the shared encoder.
func (z *zstdCodec) Compress(dst, src []byte) ([]byte, error) {
	if err := checkSrcLen("zstd", len(src)); err != nil {
		return nil, err
	}
	if len(src) == 0 {
		return dst[:0], nil
	}
	if z.c != nil {
		return z.c.compress(dst, src)
	}
	enc, err := z.encoder()
	if err != nil {
		return nil, err
	}
	return enc.EncodeAll(src, dst[:0]), nil
}

// Decompress decodes with the shared decoder into at most rawLen bytes.
func (z *zstdCodec) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	if out, done, err := startDecompress("zstd", dst, src, rawLen); done {
		return out, err
	}
	dec, err := z.decoder()
	if err != nil {
		return nil, err
	}
	// The three-index slice caps the output at rawLen, so a frame that
	// claims or produces more fails instead of growing the buffer.
	out, err := dec.DecodeAll(src, sized(dst, rawLen)[:0:rawLen])
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if len(out) != rawLen {
		return nil, fmt.Errorf("zstd: decompressed %d bytes, want %d", len(out), rawLen)
	}
	return out, nil
}
