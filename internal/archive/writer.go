package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/seal"
)

// Writer writes one archive to an io.Writer that only ever sees sequential
// writes, so it can be a plain file, a pipe or stdout. Many StreamWriters
// feed it at once: each compresses in its own goroutine and only the final
// append of a finished frame is serialized.
type Writer struct {
	codec   codec.Codec
	codecID uint8
	version int       // the format version in the header, repeated in the trailer
	key     *seal.Key // an encrypted archive's data key; nil for a clear one

	mu      sync.Mutex
	w       io.Writer
	off     int64 // bytes written so far, the offset of the next frame
	raw     int64 // raw bytes of all content frames so far
	err     error // first failure; every later call returns it
	closed  bool
	frames  []frameEntry
	streams map[uint32]*streamState
	open    int // streams opened and not yet closed
	// dataRaw and dataStored sum the closed streams that hold data
	// (DataTotals), as they close.
	dataRaw, dataStored int64
}

// streamState is the Writer's record of one stream, filled in by Close.
type streamState struct {
	info   StreamInfo
	closed bool
	pack   uint32 // a packed stream's: 1 + the index in frames of its Pack frame
}

// errWriterClosed is returned by calls made after Writer.Close.
var errWriterClosed = errors.New("archive: writer is closed")

// NewWriter writes the archive header, recording the format version and
// codec in m first so that the manifest on disk describes the frames that
// follow. m must already list everything the archive will contain. With
// recipients, the archive is encrypted to them (format version 3): a
// random data key, wrapped to each with age, seals the manifest, every
// frame and the footer.
func NewWriter(w io.Writer, m *Manifest, c codec.Codec, recipients ...age.Recipient) (*Writer, error) {
	id, ok := codecID(c.Name())
	if !ok {
		return nil, fmt.Errorf("archive: codec %q has no frame codec id", c.Name())
	}
	m.FormatVersion = FormatVersion
	m.Codec = c.Name()
	m.Level, m.LevelAuto = c.Level(), nil
	if a, ok := c.(*codec.ZstdAuto); ok {
		lo, hi := a.Range()
		m.LevelAuto = &LevelRange{Min: lo, Max: hi}
	}
	js, version, err := marshalManifestAt(m, formatPacked)
	m.FormatVersion = version
	if err != nil {
		return nil, fmt.Errorf("archive: encoding manifest: %w", err)
	}
	if len(js) > MaxManifestSize {
		return nil, fmt.Errorf("archive: manifest is %d bytes, more than the %d byte limit", len(js), MaxManifestSize)
	}
	if js, err = packManifest(js); err != nil {
		return nil, fmt.Errorf("archive: compressing manifest: %w", err)
	}
	var hdr []byte
	var key *seal.Key
	if len(recipients) > 0 {
		if hdr, key, err = sealedHeader(js, version, recipients); err != nil {
			return nil, err
		}
	} else {
		hdr = make([]byte, 0, headerFixedSize+len(js)+4)
		hdr = append(hdr, headerMagic...)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(version))
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(js)))
		hdr = append(hdr, js...)
		hdr = binary.LittleEndian.AppendUint32(hdr, crc32c(js))
	}

	aw := &Writer{
		codec:   c,
		codecID: id,
		version: version,
		key:     key,
		w:       w,
		streams: make(map[uint32]*streamState),
	}
	if err := aw.write(hdr); err != nil {
		return nil, fmt.Errorf("archive: writing header: %w", err)
	}
	return aw, nil
}

// write appends b to the output; callers hold mu (or own the Writer).
func (w *Writer) write(b []byte) error {
	n, err := w.w.Write(b)
	w.off += int64(n)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// Stream starts a stream of the given content kind. Each StreamWriter must
// be used by one goroutine at a time; different streams may be written
// concurrently. Misuse (a reused id, a kind that cannot start a stream) is
// reported by the StreamWriter's first call and fails the whole archive,
// since such an archive could not be restored correctly.
func (w *Writer) Stream(kind Kind, id uint32) *StreamWriter {
	s := &StreamWriter{w: w, kind: kind, id: id}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.err != nil:
		s.err = w.err
	case w.closed:
		s.err = errWriterClosed
	case !kind.contentKind():
		w.err = fmt.Errorf("archive: stream %d: %v is not a stream kind", id, kind)
		s.err = w.err
	case w.streams[id] != nil:
		w.err = fmt.Errorf("archive: stream %d opened twice", id)
		s.err = w.err
	default:
		w.streams[id] = &streamState{info: StreamInfo{ID: id, Kind: kind}}
		w.open++
	}
	return s
}

// appendFrame writes one finished frame and indexes it.
func (w *Writer) appendFrame(h *frameHeader, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appendFrameLocked(h, payload)
}

// appendFrameLocked is appendFrame with w.mu held: a caller that needs the
// frame's index (len(w.frames)-1) reads it before another frame follows.
func (w *Writer) appendFrameLocked(h *frameHeader, payload []byte) error {
	var hb [frameHeaderSize]byte
	h.marshal(&hb)
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errWriterClosed
	}
	off := w.off
	if err := w.write(hb[:]); err != nil {
		w.err = fmt.Errorf("archive: writing frame %d of stream %d: %w", h.seq, h.stream, err)
		return w.err
	}
	if err := w.write(payload); err != nil {
		w.err = fmt.Errorf("archive: writing frame %d of stream %d: %w", h.seq, h.stream, err)
		return w.err
	}
	w.frames = append(w.frames, frameEntry{
		off:    off,
		stream: h.stream,
		seq:    h.seq,
		raw:    h.rawLen,
		stored: h.storedLen,
		kind:   h.kind,
		codec:  h.codec,
	})
	if h.kind != KindEnd {
		w.raw += int64(h.rawLen)
	}
	return nil
}

// finishStream records a closed stream's totals for the footer.
func (w *Writer) finishStream(info StreamInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeStreamLocked(info)
}

// closeStreamLocked records a stream's totals, for the footer and
// DataBytes, and returns its state. w.mu is held.
func (w *Writer) closeStreamLocked(info StreamInfo) *streamState {
	st := w.streams[info.ID]
	st.info = info
	st.closed = true
	w.open--
	raw, stored := DataTotals([]StreamInfo{info})
	w.dataRaw, w.dataStored = w.dataRaw+raw, w.dataStored+stored
	return st
}

// Close writes the footer and trailer, which is what makes the archive
// valid: a reader treats a file without them as incomplete. Closing with
// a stream still open is an error, because that stream would be missing
// its End frame.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	if w.open > 0 {
		var ids []uint32
		for id, st := range w.streams {
			if !st.closed {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		w.err = fmt.Errorf("archive: %d stream(s) opened but not closed (first: stream %d)", len(ids), ids[0])
		return w.err
	}
	f := footer{frames: w.frames}
	ids := make([]uint32, 0, len(w.streams))
	for id := range w.streams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st := w.streams[id]
		f.streams = append(f.streams, st.info)
		f.packs = append(f.packs, st.pack)
	}
	fb, err := encodeFooter(&f, w.version, w.key)
	if err != nil {
		w.err = err
		return err
	}
	t := trailer{
		footerOff: w.off,
		footerLen: int64(len(fb)),
		footerCRC: crc32c(fb),
		version:   uint32(w.version),
	}
	var tb [trailerSize]byte
	t.marshal(&tb)
	if err := w.write(fb); err != nil {
		w.err = fmt.Errorf("archive: writing footer: %w", err)
		return w.err
	}
	if err := w.write(tb[:]); err != nil {
		w.err = fmt.Errorf("archive: writing trailer: %w", err)
		return w.err
	}
	w.closed = true
	w.frames = nil
	return nil
}

// Bytes reports progress: raw is the uncompressed content written so far,
// stored is the archive size so far (headers, frames and, once closed,
// footer included).
func (w *Writer) Bytes() (raw, stored int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.raw, w.off
}

// DataBytes sums the closed streams that hold data (DataTotals): the
// archive's size as dump, list, restore and verify all report it.
func (w *Writer) DataBytes() (raw, stored int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dataRaw, w.dataStored
}

// StreamWriter appends the frames of one stream. It compresses in the
// caller's goroutine, which is where dump parallelism comes from, and keeps
// one reusable buffer for compressed output.
type StreamWriter struct {
	w    *Writer
	kind Kind
	id   uint32

	seq    uint32
	rows   int64
	raw    int64
	stored int64
	crc    uint32
	buf    []byte
	sealed []byte // an encrypted archive's sealed payload, reused
	closed bool
	err    error

	pack  *Packer // while the stream is packed
	start int     // where its content begins in pack's buffer
}

// ID is the stream's id, as given to Writer.Stream.
func (s *StreamWriter) ID() uint32 { return s.id }

// Kind is the stream's content kind, as given to Writer.Stream.
func (s *StreamWriter) Kind() Kind { return s.kind }

// WriteBlock compresses raw and appends it as one frame; rows is how many
// COPY rows it holds (0 for schema and large-object bytes). Blocks whose
// compressed form would not be smaller are stored uncompressed. The caller
// may reuse raw as soon as WriteBlock returns. An empty block writes
// nothing.
func (s *StreamWriter) WriteBlock(raw []byte, rows int64) error {
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return fmt.Errorf("archive: stream %d: write after close", s.id)
	}
	if len(raw) > MaxBlockSize {
		return fmt.Errorf("archive: stream %d: block of %d bytes exceeds the %d byte limit", s.id, len(raw), MaxBlockSize)
	}
	if rows < 0 {
		return fmt.Errorf("archive: stream %d: negative row count %d", s.id, rows)
	}
	if len(raw) == 0 {
		if rows != 0 {
			return fmt.Errorf("archive: stream %d: %d rows in an empty block", s.id, rows)
		}
		return nil
	}
	if s.pack != nil {
		if !s.pack.add(s, raw) {
			// Too big for a pack: what the pack held of it becomes its
			// first frame, already counted.
			first := s.pack.unpack(s)
			s.pack = nil
			if err := s.frame(first); err != nil {
				return err
			}
			return s.WriteBlock(raw, rows)
		}
	} else if err := s.frame(raw); err != nil {
		return err
	}
	s.rows += rows
	s.raw += int64(len(raw))
	s.crc = crc32cUpdate(s.crc, raw)
	return nil
}

// frame compresses raw and appends it as the stream's next frame.
func (s *StreamWriter) frame(raw []byte) error {
	if len(raw) == 0 {
		return nil
	}
	payload, id := raw, codecNone
	if s.w.codecID != codecNone {
		out, err := s.w.codec.Compress(s.buf, raw)
		if err != nil {
			return s.fail(fmt.Errorf("archive: stream %d frame %d: compressing: %w", s.id, s.seq, err))
		}
		s.buf = out
		if len(out) < len(raw) {
			payload, id = out, s.w.codecID
		}
	}
	h := frameHeader{
		kind:      s.kind,
		codec:     id,
		stream:    s.id,
		seq:       s.seq,
		rawLen:    uint32(len(raw)),
		storedLen: uint32(len(payload)),
	}
	stored := int64(len(payload))
	payload = sealFrame(s.w.key, &h, payload, &s.sealed)
	if err := s.w.appendFrame(&h, payload); err != nil {
		return s.fail(err)
	}
	s.seq++
	s.stored += stored
	return nil
}

func (s *StreamWriter) fail(err error) error {
	s.err = err
	return err
}

// Close ends the stream with an End frame carrying its totals. Closing
// again is a no-op that returns the first Close's result.
func (s *StreamWriter) Close() error {
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return nil
	}
	if p := s.pack; p != nil {
		// Its pack closes it once written.
		s.closed, s.pack = true, nil
		if err := p.close(s); err != nil {
			return s.fail(err)
		}
		return nil
	}
	var pb [endPayloadSize]byte
	e := endPayload{rows: uint64(s.rows), raw: uint64(s.raw), frames: uint64(s.seq), crc: s.crc}
	e.marshal(&pb)
	h := frameHeader{
		kind:      KindEnd,
		codec:     codecNone,
		flags:     uint16(s.kind),
		stream:    s.id,
		seq:       s.seq,
		rawLen:    endPayloadSize,
		storedLen: endPayloadSize,
	}
	if err := s.w.appendFrame(&h, sealFrame(s.w.key, &h, pb[:], &s.sealed)); err != nil {
		return s.fail(err)
	}
	s.closed = true
	s.buf, s.sealed = nil, nil
	s.w.finishStream(StreamInfo{
		ID:          s.id,
		Kind:        s.kind,
		Rows:        s.rows,
		RawBytes:    s.raw,
		StoredBytes: s.stored,
		Frames:      int(s.seq),
		CRC:         s.crc,
	})
	return nil
}
