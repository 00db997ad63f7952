package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/pgsprint/pgsprint/internal/codec"
)

// Packed streams (docs/FORMAT.md, "Packed streams", version 5). A stream
// costs its frame headers, its End frame and its footer entries, about
// 200 bytes, and a frame compressed alone compresses badly when it is
// small: 100,000 large objects of 100 bytes made an archive five times
// pg_dump's. So small streams are packed: a Pack frame holds the whole
// content of many streams, compressed together, and a directory of them;
// such a stream has no frame of its own, and its footer entry names its
// pack. A reader of one of them decompresses the pack (a Reader keeps the
// last few decompressed: packCache), a Sequential turns a pack back into
// each stream's data and End frames.

// formatPacked is the format version with Pack frames, a compressed
// manifest and a compressed footer: every archive written since.
const formatPacked = 5

// memberEntrySize is one stream's entry in a pack's directory.
const memberEntrySize = 24

// packCacheSize is how many decompressed packs a Reader keeps: enough that
// restore workers reading neighbouring small streams at once decompress
// each pack about once.
const packCacheSize = 16

// member is one stream of a pack, as its directory lists it.
type member struct {
	id   uint32
	kind Kind
	rows uint64
	raw  uint32
	crc  uint32
}

// appendDirectory appends the directory of ms to b: each member's entry,
// then their count. The directory ends the pack's raw bytes, after the
// members' contents in directory order.
func appendDirectory(b []byte, ms []member) []byte {
	for _, m := range ms {
		b = binary.LittleEndian.AppendUint32(b, m.id)
		b = append(b, byte(m.kind), 0, 0, 0)
		b = binary.LittleEndian.AppendUint64(b, m.rows)
		b = binary.LittleEndian.AppendUint32(b, m.raw)
		b = binary.LittleEndian.AppendUint32(b, m.crc)
	}
	return binary.LittleEndian.AppendUint32(b, uint32(len(ms)))
}

// parseDirectory splits a pack's raw bytes into its members and their
// contents, checking that the directory and the contents fill raw exactly
// and that each content matches its checksum.
func parseDirectory(raw []byte) ([]member, [][]byte, error) {
	if len(raw) < 4 {
		return nil, nil, errors.New("pack too short for its directory")
	}
	n := uint64(binary.LittleEndian.Uint32(raw[len(raw)-4:]))
	if n == 0 || n > uint64(len(raw)-4)/memberEntrySize {
		return nil, nil, fmt.Errorf("pack directory of %d entries does not fit %d bytes", n, len(raw))
	}
	dir := raw[len(raw)-4-int(n)*memberEntrySize : len(raw)-4]
	content := raw[:len(raw)-4-len(dir)]
	ms, parts := make([]member, n), make([][]byte, n)
	off := 0
	for i := range ms {
		p := dir[i*memberEntrySize:]
		if p[5] != 0 || p[6] != 0 || p[7] != 0 {
			return nil, nil, fmt.Errorf("pack directory entry %d has nonzero reserved bytes", i)
		}
		m := member{id: binary.LittleEndian.Uint32(p), kind: Kind(p[4]), rows: binary.LittleEndian.Uint64(p[8:]),
			raw: binary.LittleEndian.Uint32(p[16:]), crc: binary.LittleEndian.Uint32(p[20:])}
		switch {
		case !m.kind.contentKind():
			return nil, nil, fmt.Errorf("pack member stream %d has invalid kind %d", m.id, uint8(m.kind))
		case uint64(m.raw) > uint64(len(content)-off):
			return nil, nil, fmt.Errorf("pack member stream %d runs past the pack's contents", m.id)
		case m.rows > 1<<62:
			return nil, nil, fmt.Errorf("pack member stream %d has impossible row count %d", m.id, m.rows)
		}
		parts[i] = content[off : off+int(m.raw)]
		off += int(m.raw)
		if crc32c(parts[i]) != m.crc {
			return nil, nil, fmt.Errorf("pack member stream %d: checksum mismatch", m.id)
		}
		ms[i] = m
	}
	if off != len(content) {
		return nil, nil, fmt.Errorf("pack members hold %d bytes, the pack %d", off, len(content))
	}
	return ms, parts, nil
}

// decompressPack decompresses a Pack frame's checked payload with its
// codec c and splits it by parseDirectory: what the random-access and the
// sequential reader both do with a pack.
func decompressPack(c codec.Codec, payload []byte, rawLen uint32, fail func(format string, args ...any) error) ([]member, [][]byte, error) {
	raw, err := c.Decompress(nil, payload, int(rawLen))
	if err != nil {
		return nil, nil, fail("decompressing: %v", err)
	}
	ms, parts, err := parseDirectory(raw)
	if err != nil {
		return nil, nil, fail("%v", err)
	}
	return ms, parts, nil
}

// memberStored apportions a pack's stored length among its members by
// their raw lengths, the remainder to the first, so that what list and
// dump report as stored adds up to the archive's frames. Writers and
// readers compute it alike; the footer records it.
func memberStored(ms []member, stored uint32) []int64 {
	out := make([]int64, len(ms))
	var total, given int64
	for _, m := range ms {
		total += int64(m.raw)
	}
	if total == 0 {
		out[0] = int64(stored)
		return out
	}
	for i, m := range ms {
		out[i] = int64(stored) * int64(m.raw) / total
		given += out[i]
	}
	out[0] += int64(stored) - given
	return out
}

// checkPackHeader applies the frame rules to a Pack frame's header: the
// lengths, no flags, seq 0, a codec the archive allows, stored < raw when
// compressed, raw = stored when not.
func checkPackHeader(h *frameHeader, codecs *[codecGzip + 1]codec.Codec, archiveCodec string, fail func(format string, args ...any) error) error {
	switch {
	case h.rawLen > MaxBlockSize || h.storedLen > MaxBlockSize:
		return fail("lengths %d/%d exceed the %d byte limit", h.rawLen, h.storedLen, MaxBlockSize)
	case h.flags != 0 || h.seq != 0:
		return fail("malformed Pack frame (flags %d, seq %d)", h.flags, h.seq)
	case int(h.codec) >= len(codecs) || codecs[h.codec] == nil:
		return fail("codec id %d is not this archive's (%s)", h.codec, archiveCodec)
	case h.codec == codecNone && h.rawLen != h.storedLen:
		return fail("uncompressed frame with raw length %d but stored length %d", h.rawLen, h.storedLen)
	case h.codec != codecNone && h.storedLen >= h.rawLen:
		return fail("compressed frame of %d bytes is not smaller than its %d raw bytes", h.storedLen, h.rawLen)
	case h.rawLen < 4+memberEntrySize:
		return fail("Pack frame of %d raw bytes cannot hold a directory", h.rawLen)
	}
	return nil
}

// Packer writes small streams into shared Pack frames. It is one worker's:
// streams opened through it are written one at a time, each packed while
// it stays under its limit and written as an ordinary stream from the
// first block that takes it over. The pack is written once it holds
// about its size, and by Close, which must come before Writer.Close: a
// packed stream counts as open until its pack is written.
type Packer struct {
	w       *Writer
	limit   int // the most raw bytes a packed stream may hold
	size    int // the raw bytes at which the pack is written
	buf     []byte
	members []member
	cbuf    []byte
	sealed  []byte
}

// Packer returns a Packer for streams of at most limit raw bytes, written
// in packs of about size raw bytes (limit <= 0: DefaultBlockSize/4; size
// <= 0: DefaultBlockSize).
func (w *Writer) Packer(limit, size int) *Packer {
	if size <= 0 {
		size = DefaultBlockSize
	}
	if limit <= 0 {
		limit = size / 4
	}
	limit, size = min(limit, MaxBlockSize/4), min(size, MaxBlockSize/2)
	return &Packer{w: w, limit: limit, size: size}
}

// Stream starts a stream as Writer.Stream does, packed until it outgrows
// the Packer's limit. The stream before it must have been closed.
func (p *Packer) Stream(kind Kind, id uint32) *StreamWriter {
	s := p.w.Stream(kind, id)
	if s.err == nil {
		s.pack, s.start = p, len(p.buf)
	}
	return s
}

// add buffers raw as the content of s, packed, or reports false when s
// would outgrow the limit: it is then written as an ordinary stream,
// starting with what the pack held of it (unpack).
func (p *Packer) add(s *StreamWriter, raw []byte) bool {
	if s.raw+int64(len(raw)) > int64(p.limit) {
		return false
	}
	p.buf = append(p.buf, raw...)
	return true
}

// unpack takes s's content out of the pack, to be written as its first
// frame; the caller writes it before p's buffer changes again.
func (p *Packer) unpack(s *StreamWriter) []byte {
	b := p.buf[s.start:]
	p.buf = p.buf[:s.start]
	return b
}

// close records a closed packed stream and writes the pack once it is full.
func (p *Packer) close(s *StreamWriter) error {
	p.members = append(p.members, member{id: s.id, kind: s.kind, rows: uint64(s.rows), raw: uint32(s.raw), crc: s.crc})
	if len(p.buf)+memberEntrySize*len(p.members) >= p.size {
		return p.flush()
	}
	return nil
}

// Close writes what the pack holds. Closing again is a no-op.
func (p *Packer) Close() error { return p.flush() }

// flush writes the pack as one Pack frame, named after its first member,
// and closes its members' streams.
func (p *Packer) flush() error {
	if len(p.members) == 0 {
		return nil
	}
	raw := appendDirectory(p.buf, p.members)
	p.buf = raw
	payload, id := raw, codecNone
	if p.w.codecID != codecNone {
		out, err := p.w.codec.Compress(p.cbuf, raw)
		if err != nil {
			return fmt.Errorf("archive: pack of stream %d: compressing: %w", p.members[0].id, err)
		}
		p.cbuf = out
		if len(out) < len(raw) {
			payload, id = out, p.w.codecID
		}
	}
	if len(raw) > MaxBlockSize {
		return fmt.Errorf("archive: pack of stream %d: %d bytes exceed the %d byte limit", p.members[0].id, len(raw), MaxBlockSize)
	}
	h := frameHeader{kind: KindPack, codec: id, stream: p.members[0].id, rawLen: uint32(len(raw)), storedLen: uint32(len(payload))}
	stored := memberStored(p.members, h.storedLen)
	payload = sealFrame(p.w.key, &h, payload, &p.sealed)
	if err := p.w.appendPack(&h, payload, p.members, stored); err != nil {
		return err
	}
	p.buf, p.members = p.buf[:0], p.members[:0]
	return nil
}

// appendPack writes a Pack frame and closes its members' streams, each
// naming the pack in its footer entry.
func (w *Writer) appendPack(h *frameHeader, payload []byte, ms []member, stored []int64) error {
	// One lock for the frame and its index: another worker's frame
	// appended in between would take the pack's place in the entries.
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.appendFrameLocked(h, payload); err != nil {
		return err
	}
	at := uint32(len(w.frames) - 1)
	for i, m := range ms {
		st := w.closeStreamLocked(StreamInfo{ID: m.id, Kind: m.kind, Rows: int64(m.rows), RawBytes: int64(m.raw), StoredBytes: stored[i], CRC: m.crc})
		st.pack = at + 1
	}
	return nil
}

// packData is a decompressed pack: its members' contents by stream id.
type packData struct {
	parts map[uint32][]byte
}

// packSlot is a pack being or having been decompressed; loaders of the
// same pack wait for the first.
type packSlot struct {
	done chan struct{}
	data *packData
	err  error
}

// packCache keeps the last packCacheSize packs a Reader decompressed.
type packCache struct {
	mu    sync.Mutex
	slots map[uint32]*packSlot
	order []uint32 // oldest first
	loads int      // packs read and decompressed, for the tests
}

// memberContent is the content of the packed stream at position i,
// checked against its footer entry. The bytes are shared: never written.
func (ar *Reader) memberContent(i int) ([]byte, error) {
	s := &ar.streams[i]
	d, err := ar.pack(s.pack - 1)
	if err != nil {
		return nil, err
	}
	b, ok := d.parts[s.id]
	if !ok {
		return nil, corruptf("archive: stream %d is missing from its pack", s.id)
	}
	return b, nil
}

// pack returns pack p (an index in ar.packs), decompressed and checked,
// from the cache or read now.
func (ar *Reader) pack(p uint32) (*packData, error) {
	c := &ar.packs
	c.mu.Lock()
	if c.slots == nil {
		c.slots = map[uint32]*packSlot{}
	}
	slot, ok := c.slots[p]
	if !ok {
		slot = &packSlot{done: make(chan struct{})}
		c.slots[p] = slot
		c.loads++
		c.order = append(c.order, p)
		if len(c.order) > packCacheSize {
			delete(c.slots, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.mu.Unlock()
	if ok {
		<-slot.done
		return slot.data, slot.err
	}
	slot.data, slot.err = ar.readPack(p)
	close(slot.done)
	return slot.data, slot.err
}

// readPack reads, checks and decompresses pack p, and checks its
// directory against the footer: the same members, each with its kind,
// rows, length, checksum and share of the stored bytes.
func (ar *Reader) readPack(p uint32) (*packData, error) {
	loc := ar.packLocs[p]
	fail := func(format string, args ...any) error {
		return corruptf("archive: pack at offset %d: %s", loc.off, fmt.Sprintf(format, args...))
	}
	buf := make([]byte, frameHeaderSize+int(loc.stored)+int(overhead(ar.key)))
	if err := readFull(ar.r, buf, loc.off); err != nil {
		return nil, fmt.Errorf("archive: pack at offset %d: %w", loc.off, err)
	}
	h, err := parseFrameHeader(buf[:frameHeaderSize])
	if err != nil {
		return nil, fail("%v", err)
	}
	if h.kind != KindPack || h.stream != loc.stream || h.rawLen != loc.raw || h.storedLen != loc.stored || h.codec != loc.codec {
		return nil, fail("frame header does not match the footer index")
	}
	if err := checkPackHeader(&h, &ar.codecs, ar.manifest.Codec, fail); err != nil {
		return nil, err
	}
	payload := buf[frameHeaderSize:]
	if crc32c(payload) != h.payloadCRC {
		return nil, fail("checksum mismatch")
	}
	if payload, err = openFrame(ar.key, buf[:frameHeaderSize], payload); err != nil {
		return nil, fail("%v", err)
	}
	ms, parts, err := decompressPack(ar.codecs[h.codec], payload, h.rawLen, fail)
	if err != nil {
		return nil, err
	}
	if len(ms) != int(loc.members) || ms[0].id != h.stream {
		return nil, fail("directory lists %d streams from %d, the footer %d from %d", len(ms), ms[0].id, loc.members, h.stream)
	}
	stored := memberStored(ms, h.storedLen)
	d := &packData{parts: make(map[uint32][]byte, len(ms))}
	for j, m := range ms {
		i, ok := ar.find(m.id)
		if !ok || ar.streams[i].pack != p+1 {
			return nil, fail("stream %d is not this pack's in the footer", m.id)
		}
		s := &ar.streams[i]
		switch {
		case d.parts[m.id] != nil:
			return nil, fail("stream %d listed twice", m.id)
		case s.kind != m.kind || s.rows != int64(m.rows) || s.raw != int64(m.raw) || s.crc != m.crc || s.stored != stored[j]:
			return nil, fail("stream %d: directory entry does not match the footer", m.id)
		}
		d.parts[m.id] = parts[j]
		if d.parts[m.id] == nil {
			d.parts[m.id] = []byte{}
		}
	}
	return d, nil
}

// packLoc is a Pack frame as the Reader keeps it.
type packLoc struct {
	off         int64
	stream      uint32 // its first member
	raw, stored uint32
	members     uint32 // streams the footer places in it
	codec       uint8
}

// compressIndex compresses b (a manifest or a footer's entries) in
// pieces of at most MaxBlockSize raw bytes, each stored as its stored
// length and its zstd bytes: the raw lengths follow from b's, which the
// reader knows (the manifest's from the 4 bytes before, the footer's
// from its counts).
func compressIndex(b []byte) ([]byte, error) {
	z, err := codec.New("zstd", 3)
	if err != nil {
		return nil, err
	}
	var out, piece []byte
	for len(b) > 0 {
		n := min(len(b), MaxBlockSize)
		if piece, err = z.Compress(piece, b[:n]); err != nil {
			return nil, err
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(piece)))
		out = append(out, piece...)
		b = b[n:]
	}
	return out, nil
}

// decompressIndex reverses compressIndex for raw bytes of the given
// length, which the caller has bounded.
func decompressIndex(b []byte, raw uint64) ([]byte, error) {
	z, err := codec.New("zstd", 0)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, min(raw, MaxBlockSize))
	for uint64(len(out)) < raw {
		if len(b) < 4 {
			return nil, errors.New("compressed index ends early")
		}
		n := uint64(binary.LittleEndian.Uint32(b))
		if n > uint64(len(b)-4) {
			return nil, errors.New("compressed index piece runs past its end")
		}
		want := min(raw-uint64(len(out)), MaxBlockSize)
		piece, err := z.Decompress(nil, b[4:4+n], int(want))
		if err != nil {
			return nil, err
		}
		out = append(out, piece...)
		b = b[4+n:]
	}
	if len(b) != 0 {
		return nil, errors.New("bytes follow the compressed index")
	}
	return out, nil
}

// packManifest is the manifest as a version 5 header holds it: its
// length, then its JSON compressed (compressIndex).
func packManifest(js []byte) ([]byte, error) {
	z, err := compressIndex(js)
	if err != nil {
		return nil, err
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(z)), uint32(len(js)))
	return append(out, z...), nil
}

// unpackManifest reverses packManifest.
func unpackManifest(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("compressed manifest too short")
	}
	n := binary.LittleEndian.Uint32(b)
	if n > MaxManifestSize {
		return nil, fmt.Errorf("manifest length %d exceeds the %d byte limit", n, MaxManifestSize)
	}
	return decompressIndex(b[4:], uint64(n))
}
