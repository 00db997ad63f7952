// Package codec compresses and decompresses independent blocks.
//
// pgsprint compresses every archive frame on its own so that dump workers
// can compress in parallel and restore workers can decompress any frame
// without the ones before it. A Codec therefore works on whole in-memory
// blocks, never on streams, and is shared by all workers at once.
package codec

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxBlockSize is the largest raw block a Codec compresses or restores.
// Decompress refuses larger rawLen values so that a corrupted or hostile
// length can never make it allocate more than this.
const MaxBlockSize = 64 << 20

// Codec compresses independent blocks. Implementations must be safe for
// concurrent use by many goroutines, because every dump and restore worker
// shares the archive's single Codec.
type Codec interface {
	// Name is the method's name as written in the manifest and accepted by
	// New: "zstd", "lz4", "gzip" or "none".
	Name() string
	// Level is the effective compression level, with the default resolved.
	Level() int
	// Compress compresses src, reusing dst's storage when it is large
	// enough (the result starts at dst[0], like append(dst[:0], ...)).
	// The empty block compresses to an empty result.
	Compress(dst, src []byte) ([]byte, error)
	// Decompress restores a block whose raw length is known from its frame
	// header, reusing dst's storage like Compress. It fails, rather than
	// returning short or long output, when the result would not be exactly
	// rawLen bytes; it never allocates more than rawLen for the result.
	Decompress(dst, src []byte, rawLen int) ([]byte, error)
}

// methodList names the supported methods for error messages.
const methodList = "zstd, lz4, gzip or none"

// New returns the codec for a method name and level. Level 0 selects the
// method's default; any other level outside the method's range is an error
// rather than being clamped, so a typo does not silently change the output.
func New(name string, level int) (Codec, error) {
	switch name {
	case "zstd":
		if err := checkLevel(name, level, 1, 22); err != nil {
			return nil, err
		}
		return newZstd(level), nil
	case "lz4":
		if err := checkLevel(name, level, 1, 9); err != nil {
			return nil, err
		}
		return newLZ4(level), nil
	case "gzip":
		if err := checkLevel(name, level, 1, 9); err != nil {
			return nil, err
		}
		return newGzip(level)
	case "none":
		if level != 0 {
			return nil, fmt.Errorf("compression method \"none\" takes no level (got %d)", level)
		}
		return none{}, nil
	default:
		return nil, fmt.Errorf("unknown compression method %q (want %s)", name, methodList)
	}
}

func checkLevel(name string, level, lo, hi int) error {
	if level != 0 && (level < lo || level > hi) {
		return fmt.Errorf("compression level %d is out of range for %s (want %d..%d)", level, name, lo, hi)
	}
	return nil
}

// Parse reads a compression spec the way pg_dump's -Z/--compress does, so
// that users can reuse what they know: "METHOD", "METHOD:LEVEL" or
// "METHOD:level=LEVEL" with METHOD one of zstd, lz4, gzip or none, or a bare
// digit 0..9 meaning a gzip level, where 0 means no compression. One
// addition: "zstd:auto" is ZstdAuto, whose level follows what the dump
// waits on; a level given (or zstd's default, 3, as pg_dump's) is kept for
// every frame.
func Parse(spec string) (Codec, error) {
	s := strings.ToLower(strings.TrimSpace(spec))
	if s == "" {
		return nil, errors.New("empty compression spec")
	}
	if s == "zstd:auto" || s == "zstd:level=auto" {
		return NewZstdAuto(), nil
	}
	if isDigits(s) {
		n, err := strconv.Atoi(s)
		if err != nil || n > 9 {
			return nil, fmt.Errorf("compression level %s is out of range (want 0..9, or METHOD[:LEVEL])", s)
		}
		if n == 0 {
			return New("none", 0)
		}
		return New("gzip", n)
	}
	name, detail, hasDetail := strings.Cut(s, ":")
	if !hasDetail {
		return New(name, 0)
	}
	if _, err := New(name, 0); err != nil {
		return nil, err
	}
	if name == "none" {
		return nil, fmt.Errorf("compression spec %q: method \"none\" takes no level", spec)
	}
	level, err := parseDetail(detail)
	if err != nil {
		return nil, fmt.Errorf("compression spec %q: %w", spec, err)
	}
	if level == 0 {
		return nil, fmt.Errorf("compression spec %q: level 0 is not valid for %s (omit the level for the default)", spec, name)
	}
	return New(name, level)
}

// parseDetail reads the part after the colon: "9" or "level=9".
func parseDetail(detail string) (int, error) {
	v := detail
	if key, val, ok := strings.Cut(detail, "="); ok {
		if strings.TrimSpace(key) != "level" {
			return 0, fmt.Errorf("unsupported compression option %q (only level is supported)", key)
		}
		v = val
	}
	v = strings.TrimSpace(v)
	if !isDigits(v) {
		return 0, fmt.Errorf("invalid compression level %q", v)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("invalid compression level %q", v)
	}
	return n, nil
}

// isDigits reports whether s is one or more ASCII digits: no sign, no space.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// checkRawLen rejects lengths Decompress must never allocate for.
func checkRawLen(name string, rawLen int) error {
	if rawLen < 0 || rawLen > MaxBlockSize {
		return fmt.Errorf("%s: raw length %d out of range (0..%d)", name, rawLen, MaxBlockSize)
	}
	return nil
}

// startDecompress is how every compressing codec's Decompress begins: a
// raw length out of range is refused, and so is a block with stored bytes
// for no raw bytes or none for some; an empty block is dst emptied. done
// says that Decompress has its answer in out and err.
func startDecompress(name string, dst, src []byte, rawLen int) (out []byte, done bool, err error) {
	if err := checkRawLen(name, rawLen); err != nil {
		return nil, true, err
	}
	switch {
	case rawLen != 0 && len(src) != 0:
		return nil, false, nil
	case rawLen != 0 || len(src) != 0:
		return nil, true, fmt.Errorf("%s: %d stored bytes for %d raw bytes", name, len(src), rawLen)
	}
	return dst[:0], true, nil
}

// checkSrcLen rejects blocks larger than any reader would accept, so that a
// writer fails early instead of producing an archive nobody can restore.
func checkSrcLen(name string, n int) error {
	if n > MaxBlockSize {
		return fmt.Errorf("%s: block of %d bytes exceeds the %d byte limit", name, n, MaxBlockSize)
	}
	return nil
}

// sized returns b resliced to length n, reusing its storage when possible.
func sized(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]byte, n)
}
