package archive

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/seal"
)

// Sequential reads an archive front to back from a source that cannot seek
// (a pipe, stdin, a network stream), returning frames in the order they
// were written. It checks everything the seekable Reader checks, in the
// order the bytes arrive: header and manifest first, each frame's header
// and payload checksum and its place in its stream, each stream's End
// totals, and at the end the footer against every frame seen (through a
// rolling checksum, so memory does not grow with the number of frames) and
// the trailer. Until Next returns io.EOF, the archive is not known to be
// complete: a consumer must treat what it read as provisional.
type Sequential struct {
	r        *bufio.Reader
	in       *countingReader // under r: the bytes that arrived
	off      int64
	version  uint32
	manifest *Manifest
	codecs   [codecGzip + 1]codec.Codec
	key      *seal.Key // an encrypted archive's data key; nil for a clear one
	streams  map[uint32]*seqStream
	frames   int64
	index    uint32 // rolling CRC-32C over the footer encoding of every frame seen
	done     bool
	err      error
	pending  []*Frame // the frames of a pack's streams, still to return
}

// seqStream is what Sequential has seen of one stream.
type seqStream struct {
	frameState
	info StreamInfo
	pack uint32 // a packed stream's: 1 + the index of its Pack frame
}

// Frame is one frame as read by Sequential. Data is the decompressed
// payload; the caller owns it. An End frame has End set and Totals filled
// (and checked against the frames before it) and no Data.
type Frame struct {
	Kind   Kind // the stream's kind, also for End frames
	Stream uint32
	Seq    uint32
	Data   []byte
	End    bool
	Totals StreamInfo
}

// NewSequential reads and checks the header and manifest from r. An
// encrypted archive is opened with the first of ids that matches (see
// Open).
func NewSequential(r io.Reader, ids ...age.Identity) (*Sequential, error) {
	in := &countingReader{r: r}
	s := &Sequential{r: bufio.NewReaderSize(in, 1<<20), in: in, streams: map[uint32]*seqStream{}}
	var hb [headerFixedSize]byte
	n, err := io.ReadFull(s.r, hb[:])
	if n < len(headerMagic) {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("archive: reading header: %w", err)
		}
		return nil, notArchive(hb[:n])
	}
	if string(hb[:8]) != headerMagic {
		return nil, notArchive(hb[:n])
	}
	if err != nil {
		return nil, s.truncated(err)
	}
	s.version = binary.LittleEndian.Uint32(hb[8:])
	if s.version > FormatVersion {
		return nil, versionError(s.version)
	}
	if s.version == 0 {
		return nil, corruptf("archive: format version 0")
	}
	manLen := int64(binary.LittleEndian.Uint32(hb[12:]))
	if manLen > MaxManifestSize {
		return nil, corruptf("archive: manifest length %d exceeds the %d byte limit", manLen, MaxManifestSize)
	}
	mb := make([]byte, manLen+4)
	if _, err := io.ReadFull(s.r, mb); err != nil {
		return nil, s.truncated(err)
	}
	s.off = headerFixedSize + manLen + 4
	if s.manifest, s.codecs, s.key, err = decodeHeader(hb[:], mb, s.version, ids); err != nil {
		return nil, err
	}
	return s, nil
}

// Manifest returns the archive's manifest.
func (s *Sequential) Manifest() *Manifest { return s.manifest }

// truncated reports an archive that ended early as incomplete, with the
// number of bytes that arrived (every one of them, read ahead or not: the
// input is at its end), and passes other read errors on.
func (s *Sequential) truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &incompleteError{size: s.in.n, pipe: true}
	}
	return fmt.Errorf("archive: reading at byte %d: %w", s.off, err)
}

// countingReader counts the bytes read through it: how far into the
// input a truncation or damage is, which the buffered reader above hides.
type countingReader struct {
	r io.Reader
	n int64
}

// Read implements io.Reader.
func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Next returns the next frame. It returns io.EOF only after the footer and
// trailer have been read and everything matched; after any other error it
// keeps returning that error.
func (s *Sequential) Next() (*Frame, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(s.pending) > 0 {
		f := s.pending[0]
		s.pending = s.pending[1:]
		return f, nil
	}
	f, err := s.next()
	if err != nil {
		s.err = err
	}
	return f, err
}

func (s *Sequential) next() (*Frame, error) {
	var hb [frameHeaderSize]byte
	if _, err := io.ReadFull(s.r, hb[:4]); err != nil {
		return nil, s.truncated(err)
	}
	if string(hb[:4]) == footerMagic {
		return nil, s.finish()
	}
	if _, err := io.ReadFull(s.r, hb[4:]); err != nil {
		return nil, s.truncated(err)
	}
	at := s.off
	h, err := parseFrameHeader(hb[:])
	if err != nil {
		return nil, corruptf("archive: frame at offset %d: %v", at, err)
	}
	fail := func(format string, args ...any) error {
		return corruptf("archive: stream %d frame %d at offset %d: %s", h.stream, h.seq, at, fmt.Sprintf(format, args...))
	}
	if h.kind == KindPack {
		return s.unpack(&h, hb[:], at, fail)
	}
	st := s.streams[h.stream]
	if st == nil {
		st = &seqStream{info: StreamInfo{ID: h.stream, Kind: h.kind}}
		if h.kind == KindEnd {
			st.info.Kind = Kind(h.flags)
		}
		st.kind = st.info.Kind
		s.streams[h.stream] = st
	}
	if err := st.check(&h, &s.codecs, s.manifest.Codec, fail); err != nil {
		return nil, err
	}
	payload, err := s.readPayload(&h, hb[:], fail)
	if err != nil {
		return nil, err
	}
	s.frames++
	s.index = crc32cUpdate(s.index, frameEntryBytes(frameEntry{off: at, stream: h.stream, seq: h.seq,
		raw: h.rawLen, stored: h.storedLen, kind: h.kind, codec: h.codec}))

	f := &Frame{Kind: st.info.Kind, Stream: h.stream, Seq: h.seq}
	if h.kind == KindEnd {
		end := parseEndPayload(payload)
		i := &st.info
		switch {
		case end.frames != uint64(i.Frames):
			return nil, fail("End frame counts %d frames, read %d", end.frames, i.Frames)
		case end.raw != uint64(i.RawBytes):
			return nil, fail("End frame counts %d raw bytes, read %d", end.raw, i.RawBytes)
		case end.crc != i.CRC:
			return nil, fail("stream checksum mismatch (End frame %08x, read %08x)", end.crc, i.CRC)
		case end.rows > 1<<62:
			return nil, fail("impossible row count %d", end.rows)
		}
		i.Rows = int64(end.rows)
		f.End, f.Totals = true, *i
		return f, nil
	}
	raw, err := s.codecs[h.codec].Decompress(nil, payload, int(h.rawLen))
	if err != nil {
		return nil, fail("decompressing: %v", err)
	}
	st.info.Frames++
	st.info.RawBytes += int64(len(raw))
	st.info.StoredBytes += int64(h.storedLen)
	st.info.CRC = crc32cUpdate(st.info.CRC, raw)
	f.Data = raw
	return f, nil
}

// finish reads the footer (its magic already consumed) and the trailer and
// checks them against everything seen; it returns io.EOF when all agree.
func (s *Sequential) finish() error {
	footerOff := s.off
	var fixed [footerFixedSize]byte
	copy(fixed[:], footerMagic)
	if _, err := io.ReadFull(s.r, fixed[4:]); err != nil {
		return s.truncated(err)
	}
	ns := uint64(binary.LittleEndian.Uint32(fixed[4:]))
	nf := binary.LittleEndian.Uint64(fixed[8:])
	if ns != uint64(len(s.streams)) || nf != uint64(s.frames) {
		return corruptf("archive: footer lists %d streams and %d frames, the archive has %d and %d", ns, nf, len(s.streams), s.frames)
	}
	entries := ns*streamEntrySize + nf*frameEntrySize
	head := fixed[:]
	if s.version >= formatPacked {
		// The compressed entries' length, which the counts only bound.
		var lb [footerLenSize]byte
		if _, err := io.ReadFull(s.r, lb[:]); err != nil {
			return s.truncated(err)
		}
		n := binary.LittleEndian.Uint64(lb[:])
		if n > entries+entries/8+64*(entries/MaxBlockSize+1)+uint64(overhead(s.key)) {
			return corruptf("archive: footer says its entries take %d bytes, too many for %d streams and %d frames", n, ns, nf)
		}
		head = append(head, lb[:]...)
		entries = n
	} else {
		entries += uint64(overhead(s.key))
	}
	body := make([]byte, uint64(len(head))+entries)
	copy(body, head)
	if _, err := io.ReadFull(s.r, body[len(head):]); err != nil {
		return s.truncated(err)
	}
	s.off += int64(len(body))
	var tb [trailerSize]byte
	if _, err := io.ReadFull(s.r, tb[:]); err != nil {
		return s.truncated(err)
	}
	if _, err := s.r.ReadByte(); err != io.EOF {
		return corruptf("archive: bytes follow the trailer")
	}
	t := trailer{
		footerOff: int64(binary.LittleEndian.Uint64(tb[0:])),
		footerLen: int64(binary.LittleEndian.Uint64(tb[8:])),
		footerCRC: binary.LittleEndian.Uint32(tb[16:]),
		version:   binary.LittleEndian.Uint32(tb[20:]),
	}
	switch {
	case string(tb[24:]) != trailerMagic:
		return corruptf("archive: bad trailer magic")
	case t.version != s.version:
		return corruptf("archive: header says format version %d, trailer says %d", s.version, t.version)
	case t.footerOff != footerOff || t.footerLen != int64(len(body)):
		return corruptf("archive: trailer places the footer at %d+%d, it is at %d+%d", t.footerOff, t.footerLen, footerOff, len(body))
	case crc32c(body) != t.footerCRC:
		return corruptf("archive: footer checksum mismatch")
	}
	f, err := decodeFooter(body, s.version, s.key)
	if err != nil {
		return err
	}
	index := uint32(0)
	for _, e := range f.frames {
		index = crc32cUpdate(index, frameEntryBytes(e))
	}
	if index != s.index {
		return corruptf("archive: footer index does not match the frames read")
	}
	for i, fs := range f.streams {
		st := s.streams[fs.ID]
		switch {
		case st == nil:
			return corruptf("archive: footer lists stream %d, which has no frames", fs.ID)
		case !st.ended:
			return corruptf("archive: stream %d has no End frame", fs.ID)
		case fs != st.info:
			return corruptf("archive: footer totals of stream %d do not match its frames", fs.ID)
		case f.packs[i] != st.pack:
			return corruptf("archive: footer places stream %d in another pack than the archive", fs.ID)
		}
	}
	s.done = true
	return io.EOF
}

// frameEntryBytes is a frame's footer encoding, for the rolling index check.
func frameEntryBytes(e frameEntry) []byte {
	f := footer{frames: []frameEntry{e}}
	return f.marshal()[footerFixedSize:]
}

// unpack reads the payload of the Pack frame h, at offset at, and
// returns the first frame of its streams, queueing the rest: each
// stream's content as one data frame (none when empty), then its End
// frame with the totals the directory gives, checked.
func (s *Sequential) unpack(h *frameHeader, hb []byte, at int64, fail func(format string, args ...any) error) (*Frame, error) {
	if err := checkPackHeader(h, &s.codecs, s.manifest.Codec, fail); err != nil {
		return nil, err
	}
	payload, err := s.readPayload(h, hb, fail)
	if err != nil {
		return nil, err
	}
	ms, parts, err := decompressPack(s.codecs[h.codec], payload, h.rawLen, fail)
	if err != nil {
		return nil, err
	}
	if ms[0].id != h.stream {
		return nil, fail("pack named after stream %d starts with stream %d", h.stream, ms[0].id)
	}
	stored := memberStored(ms, h.storedLen)
	pack := uint32(s.frames) + 1
	s.frames++
	s.index = crc32cUpdate(s.index, frameEntryBytes(frameEntry{off: at, stream: h.stream, seq: h.seq,
		raw: h.rawLen, stored: h.storedLen, kind: h.kind, codec: h.codec}))
	for j, m := range ms {
		if s.streams[m.id] != nil {
			return nil, fail("stream %d of the pack was seen before", m.id)
		}
		st := &seqStream{info: StreamInfo{ID: m.id, Kind: m.kind, Rows: int64(m.rows), RawBytes: int64(m.raw),
			StoredBytes: stored[j], CRC: m.crc}, pack: pack}
		st.kind, st.ended = m.kind, true
		s.streams[m.id] = st
		if len(parts[j]) > 0 {
			s.pending = append(s.pending, &Frame{Kind: m.kind, Stream: m.id, Data: parts[j]})
		}
		s.pending = append(s.pending, &Frame{Kind: m.kind, Stream: m.id, End: true, Totals: st.info})
	}
	f := s.pending[0]
	s.pending = s.pending[1:]
	return f, nil
}

// readPayload reads the payload of the frame h (its header hb just read),
// checks its checksum and opens it (encrypted archives), moving s.off
// past the frame.
func (s *Sequential) readPayload(h *frameHeader, hb []byte, fail func(format string, args ...any) error) ([]byte, error) {
	payload := make([]byte, int64(h.storedLen)+overhead(s.key))
	if _, err := io.ReadFull(s.r, payload); err != nil {
		return nil, s.truncated(err)
	}
	if crc32c(payload) != h.payloadCRC {
		return nil, fail("checksum mismatch")
	}
	s.off += frameHeaderSize + int64(len(payload))
	payload, err := openFrame(s.key, hb, payload)
	if err != nil {
		return nil, fail("%v", err)
	}
	return payload, nil
}
