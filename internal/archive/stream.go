package archive

import (
	"context"
	"fmt"
	"io"

	"github.com/pgsprint/pgsprint/internal/store"
)

// Order is Indexed: the footer lists every stream before any is read.
func (ar *Reader) Order() Order { return Indexed }

// OpenStream returns the raw content of one stream, decompressed, in seq
// order. Every frame is checked against its header checksum, its payload
// checksum, its footer entry and its raw length; at the end the stream's
// totals and CRC over all raw bytes are checked against the End frame and
// the footer. Any mismatch is returned instead of io.EOF, so a reader that
// reaches io.EOF has exactly the bytes that were written.
//
// Each returned reader holds one frame of buffers; many may be open at
// once. An unknown id gives a reader whose first Read fails.
func (ar *Reader) OpenStream(id uint32) io.ReadCloser {
	i, ok := ar.find(id)
	if !ok {
		return &streamReader{err: fmt.Errorf("archive: no stream %d in archive", id)}
	}
	info := ar.info(i)
	if ar.streams[i].pack != 0 {
		return &streamReader{ar: ar, info: &info, at: i, packed: true}
	}
	frames := ar.frameRange(i)
	s := &streamReader{ar: ar, info: &info, at: i, frames: len(frames)}
	if rr, ok := ar.r.(store.RangeReader); ok {
		// A remote medium fetches this stream's frames ahead.
		ranges := make([]store.Range, len(frames))
		for j, e := range frames {
			ranges[j] = store.Range{Off: e.off, Len: frameHeaderSize + int64(e.stored) + overhead(ar.key)}
		}
		s.ahead = rr.ReadRanges(ranges)
	}
	return s
}

// streamReader reads one stream frame by frame.
type streamReader struct {
	ar     *Reader
	info   *StreamInfo
	at     int // the stream's position in ar.streams
	frames int // how many frames it has, End included
	next   int
	ahead  io.ReadCloser // the frames in order, when the medium reads ahead
	packed bool          // its content is in a pack (memberContent)

	buf    []byte // header + stored payload of the current frame
	raw    []byte // decompressed payload
	pos    int    // read position in raw
	crc    uint32
	total  int64
	closed bool
	err    error // sticky: io.EOF after a verified End frame
}

// Read implements io.Reader.
func (s *streamReader) Read(p []byte) (int, error) {
	for s.pos >= len(s.raw) {
		if s.err != nil {
			return 0, s.err
		}
		if s.closed {
			return 0, fmt.Errorf("archive: stream %d: read after close", s.info.ID)
		}
		s.err = s.nextFrame()
	}
	n := copy(p, s.raw[s.pos:])
	s.pos += n
	return n, nil
}

// WriteTo writes the rest of the stream to w frame by frame, sparing
// io.Copy a buffer copy. Like Read, it fails rather than finish early.
func (s *streamReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for {
		if s.pos < len(s.raw) {
			n, err := w.Write(s.raw[s.pos:])
			total += int64(n)
			s.pos += n
			if err != nil {
				return total, err
			}
			if s.pos < len(s.raw) {
				return total, io.ErrShortWrite
			}
		}
		if s.err != nil {
			if s.err == io.EOF {
				return total, nil
			}
			return total, s.err
		}
		if s.closed {
			return total, fmt.Errorf("archive: stream %d: read after close", s.info.ID)
		}
		s.err = s.nextFrame()
	}
}

// Close releases the buffers.
func (s *streamReader) Close() error {
	s.closed = true
	s.buf, s.raw, s.pos = nil, nil, 0
	if s.ahead != nil {
		s.ahead.Close()
	}
	return nil
}

// drain reads the whole stream without copying it out, checking ctx
// between frames; Verify uses it.
func (s *streamReader) drain(ctx context.Context) error {
	for {
		if s.err != nil {
			if s.err == io.EOF {
				return nil
			}
			return s.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		s.err = s.nextFrame()
	}
}

// nextFrame loads and checks the next frame into s.raw. It returns io.EOF
// after the End frame has been read and every total matched.
func (s *streamReader) nextFrame() error {
	s.raw, s.pos = s.raw[:0], 0
	if s.packed {
		// The pack's bytes, shared with the cache: never written to.
		if s.next > 0 {
			return io.EOF
		}
		s.next++
		b, err := s.ar.memberContent(s.at)
		if err != nil {
			return err
		}
		s.raw = b[:len(b):len(b)]
		return nil
	}
	if s.next >= s.frames {
		// Open guarantees the End frame is last; this is defensive.
		return corruptf("archive: stream %d ends without an End frame", s.info.ID)
	}
	e := s.ar.entry(s.at, uint32(s.next))
	s.next++
	fail := func(format string, args ...any) error {
		return corruptf("archive: stream %d frame %d at offset %d: %s", e.stream, e.seq, e.off, fmt.Sprintf(format, args...))
	}

	n := frameHeaderSize + int(e.stored) + int(overhead(s.ar.key))
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	s.buf = s.buf[:n]
	var err error
	if s.ahead != nil {
		_, err = io.ReadFull(s.ahead, s.buf)
	} else {
		err = readFull(s.ar.r, s.buf, e.off)
	}
	if err != nil {
		return fmt.Errorf("archive: stream %d frame %d at offset %d: %w", e.stream, e.seq, e.off, err)
	}
	h, err := parseFrameHeader(s.buf[:frameHeaderSize])
	if err != nil {
		return fail("%v", err)
	}
	if h.kind != e.kind || h.codec != e.codec || h.stream != e.stream ||
		h.seq != e.seq || h.rawLen != e.raw || h.storedLen != e.stored {
		return fail("frame header does not match the footer index")
	}
	st := frameState{kind: s.info.Kind, next: uint32(s.next - 1)}
	if err := st.check(&h, &s.ar.codecs, s.ar.manifest.Codec, fail); err != nil {
		return err
	}
	payload := s.buf[frameHeaderSize:]
	if crc32c(payload) != h.payloadCRC {
		return fail("checksum mismatch")
	}
	if payload, err = openFrame(s.ar.key, s.buf[:frameHeaderSize], payload); err != nil {
		return fail("%v", err)
	}

	if h.kind == KindEnd {
		return s.checkEnd(parseEndPayload(payload), fail)
	}
	s.raw, err = s.ar.codecs[h.codec].Decompress(s.raw, payload, int(h.rawLen))
	if err != nil {
		return fail("decompressing: %v", err)
	}
	s.crc = crc32cUpdate(s.crc, s.raw)
	s.total += int64(len(s.raw))
	return nil
}

// checkEnd compares what was read with the End frame and the footer.
func (s *streamReader) checkEnd(end endPayload, fail func(string, ...any) error) error {
	info := s.info
	frames := uint64(s.frames - 1)
	switch {
	case end.frames != frames || uint64(info.Frames) != frames:
		return fail("End frame counts %d frames, footer %d, read %d", end.frames, info.Frames, frames)
	case end.raw != uint64(s.total) || info.RawBytes != s.total:
		return fail("End frame counts %d raw bytes, footer %d, read %d", end.raw, info.RawBytes, s.total)
	case end.rows != uint64(info.Rows):
		return fail("End frame counts %d rows, footer %d", end.rows, info.Rows)
	case end.crc != s.crc || info.CRC != s.crc:
		return fail("stream checksum mismatch (End frame %08x, footer %08x, read %08x)", end.crc, info.CRC, s.crc)
	}
	return io.EOF
}
