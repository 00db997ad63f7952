//go:build !cgo || pgsprint_purego

package codec

// zstdEngine names the zstd compressor this build uses, for reports.
const zstdEngine = "klauspost/compress (pure Go)"

// zstdModule is the Go module that brings the compressor.
const zstdModule = "github.com/klauspost/compress"

// newZstdCompressor returns nil in a pure Go build: the zstd codec then
// compresses with klauspost/compress, which needs no C compiler.
func newZstdCompressor(int) zstdCompressor { return nil }
