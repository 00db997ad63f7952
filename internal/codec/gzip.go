package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
)

// gzipDefaultLevel matches gzip(1) and pg_dump.
const gzipDefaultLevel = 6

// gzipCodec writes each block as one complete gzip member, so a block can
// be inspected with standard tools. Writers and readers carry large
// internal state and are pooled per codec (and so per level).
type gzipCodec struct {
	level   int
	writers sync.Pool // *gzip.Writer at level
	readers sync.Pool // *gzip.Reader
}

func newGzip(level int) (*gzipCodec, error) {
	if level == 0 {
		level = gzipDefaultLevel
	}
	// Validate once here so the pool's New cannot fail later.
	if _, err := gzip.NewWriterLevel(io.Discard, level); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	c := &gzipCodec{level: level}
	c.writers.New = func() any {
		w, _ := gzip.NewWriterLevel(nil, level)
		return w
	}
	return c, nil
}

// Name implements Codec.
func (c *gzipCodec) Name() string { return "gzip" }

// Level implements Codec.
func (c *gzipCodec) Level() int { return c.level }

// appendWriter lets a gzip.Writer write straight into the caller's dst.
type appendWriter struct{ b []byte }

// Write appends p; it never fails.
func (a *appendWriter) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

// Compress writes src as one gzip member.
func (c *gzipCodec) Compress(dst, src []byte) ([]byte, error) {
	if err := checkSrcLen("gzip", len(src)); err != nil {
		return nil, err
	}
	if len(src) == 0 {
		return dst[:0], nil
	}
	out := &appendWriter{b: dst[:0]}
	zw := c.writers.Get().(*gzip.Writer)
	defer c.writers.Put(zw)
	zw.Reset(out)
	if _, err := zw.Write(src); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	zw.Reset(nil) // drop the reference to out
	return out.b, nil
}

// Decompress reads exactly one gzip member of exactly rawLen bytes.
func (c *gzipCodec) Decompress(dst, src []byte, rawLen int) ([]byte, error) {
	if out, done, err := startDecompress("gzip", dst, src, rawLen); done {
		return out, err
	}
	// bytes.Reader is an io.ByteReader, so the inflater reads from it
	// directly and its Len tells whether anything follows the member.
	in := bytes.NewReader(src)
	zr, _ := c.readers.Get().(*gzip.Reader)
	if zr == nil {
		zr = new(gzip.Reader)
	}
	defer c.readers.Put(zr)
	if err := zr.Reset(in); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	zr.Multistream(false)
	out := sized(dst, rawLen)
	if _, err := io.ReadFull(zr, out); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("gzip: decompressed fewer than %d bytes", rawLen)
		}
		return nil, fmt.Errorf("gzip: %w", err)
	}
	// The member must end exactly here, and its trailer must check out
	// (the reader verifies CRC-32 and size when it reaches the end).
	var one [1]byte
	if n, err := zr.Read(one[:]); n != 0 || err != io.EOF {
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return nil, fmt.Errorf("gzip: decompressed more than %d bytes", rawLen)
	}
	if in.Len() != 0 {
		return nil, fmt.Errorf("gzip: %d unexpected bytes after the compressed data", in.Len())
	}
	return out, nil
}
