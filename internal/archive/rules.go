package archive

import (
	"github.com/pgsprint/pgsprint/internal/codec"
)

// frameState is what a reader knows of one stream before its next frame.
type frameState struct {
	kind  Kind   // the stream's content kind
	next  uint32 // the seq the next frame must carry
	ended bool   // the stream's End frame has been read
}

// check applies the frame rules of docs/FORMAT.md to h, the next frame of
// the stream st describes, and on success advances st past it. Every
// reader calls it: the seekable Reader for each footer entry (buildIndex)
// and each frame it reads (nextFrame), the Sequential for each frame as
// it arrives. The rules: lengths within MaxBlockSize; a valid stream
// kind; seq 0, 1, 2, ... and nothing after the End frame; an End frame
// is uncompressed, of endPayloadSize bytes, flagged with its stream's
// kind; any other frame has its stream's kind and no flags, a codec the
// archive allows (codecs: none and the manifest's), raw = stored when
// stored uncompressed, stored < raw when compressed, and is not empty.
// A violation comes back through fail, which names the frame.
func (st *frameState) check(h *frameHeader, codecs *[codecGzip + 1]codec.Codec, archiveCodec string, fail func(format string, args ...any) error) error {
	end := h.kind == KindEnd
	switch {
	case h.rawLen > MaxBlockSize || h.storedLen > MaxBlockSize:
		return fail("lengths %d/%d exceed the %d byte limit", h.rawLen, h.storedLen, MaxBlockSize)
	case !st.kind.contentKind():
		return fail("invalid kind %d", uint8(st.kind))
	case st.ended:
		return fail("frame follows the stream's End frame")
	case h.seq != st.next:
		return fail("out of sequence (want seq %d)", st.next)
	case end && (h.codec != codecNone || h.rawLen != endPayloadSize || h.storedLen != endPayloadSize || Kind(h.flags) != st.kind):
		return fail("malformed End frame")
	case !end && h.kind != st.kind:
		return fail("%v frame in a %v stream", h.kind, st.kind)
	case !end && h.flags != 0:
		return fail("nonzero flags")
	case int(h.codec) >= len(codecs) || codecs[h.codec] == nil:
		return fail("codec id %d is not this archive's (%s)", h.codec, archiveCodec)
	case !end && h.codec == codecNone && h.rawLen != h.storedLen:
		return fail("uncompressed frame with raw length %d but stored length %d", h.rawLen, h.storedLen)
	case h.codec != codecNone && h.storedLen >= h.rawLen:
		return fail("compressed frame of %d bytes is not smaller than its %d raw bytes", h.storedLen, h.rawLen)
	case !end && h.rawLen == 0:
		return fail("empty data frame")
	}
	st.next++
	st.ended = end
	return nil
}

// header is the frame header a footer entry stands for, in a stream of
// kind streamKind (the footer records no flags: those a valid frame has).
func (e *frameEntry) header(streamKind Kind) frameHeader {
	h := frameHeader{kind: e.kind, codec: e.codec, stream: e.stream, seq: e.seq, rawLen: e.raw, storedLen: e.stored}
	if e.kind == KindEnd {
		h.flags = uint16(streamKind)
	}
	return h
}
