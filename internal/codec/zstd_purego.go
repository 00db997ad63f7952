//go:build !cgo || pgsprint_purego

package codec

// zstdEngine names the zstd compressor this build uses, for reports.
const zstdEngine = "klauspost/compress (pure Go)"

// zstdModule is the Go module that brings the compressor.
const zstdModule = "github.com/klauspost/compress"

// zstdAutoLevels are the levels ZstdAuto climbs, lowest first: one for
// each of klauspost's speeds short of its slowest (EncoderLevelFromZstd
// maps 1 to SpeedFastest, 3 to SpeedDefault, 6 to SpeedBetterCompression).
func zstdAutoLevels() []int { return []int{1, 3, 6} }

// newZstdCompressor returns nil in a pure Go build: the zstd codec then
// compresses with klauspost/compress, which needs no C compiler.
func newZstdCompressor(int) zstdCompressor { return nil }
