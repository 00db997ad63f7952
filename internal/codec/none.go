package codec

import "fmt"

// none stores blocks as they are. It exists so that "no compression" goes
// through the same code paths as real codecs, and so that the archive can
// store an incompressible block raw whatever the archive's codec is.
type none struct{}

// Name implements Codec.
func (none) Name() string { return "none" }

// Level implements Codec; "none" has no levels.
func (none) Level() int { return 0 }

// Compress copies src.
func (none) Compress(dst, src []byte) ([]byte, error) {
	if err := checkSrcLen("none", len(src)); err != nil {
		return nil, err
	}
	return append(dst[:0], src...), nil
}

// Decompress copies src, which must be exactly rawLen bytes.
func (none) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	if err := checkRawLen("none", rawLen); err != nil {
		return nil, err
	}
	if len(src) != rawLen {
		return nil, fmt.Errorf("none: stored length %d does not match raw length %d", len(src), rawLen)
	}
	return append(dst[:0], src...), nil
}
