package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/seal"
)

// Reader gives random access to a finished archive. Open checks the
// header, trailer and footer index up front, so that a restore learns the
// archive is unusable before it touches the database; frame contents are
// checked as they are read.
//
// A Reader is safe for concurrent use, provided the io.ReaderAt is (an
// *os.File is): restore workers read different streams at once.
type Reader struct {
	r        io.ReaderAt
	manifest *Manifest

	// The index is kept as small as the footer allows, since a restore
	// holds it for its whole run (index.go).
	streams []streamEntry              // sorted by ID
	frames  []frameLoc                 // grouped by stream in streams' order, each in seq order, End last
	codecs  [codecGzip + 1]codec.Codec // decoders by frame codec id; nil if not allowed
	packed  uint8                      // the codec id of compressed frames (the manifest's codec)
	key     *seal.Key                  // an encrypted archive's data key; nil for a clear one
	closer  io.Closer                  // a spooled archive's file, closed by Close

	packLocs []packLoc // the Pack frames, in file order
	packs    packCache // the last packs decompressed
}

// Close releases what the Reader owns: nothing, unless it reads an
// archive spooled from a pipe into an unlinked file. The io.ReaderAt
// given to Open is its caller's to close.
func (ar *Reader) Close() error {
	if ar.closer == nil {
		return nil
	}
	return ar.closer.Close()
}

// Open reads and checks everything but the frame payloads. It returns
// ErrNotArchive, ErrIncomplete, a *VersionError or an error matching
// ErrCorrupt, each with a one-line message a user can act on. An
// encrypted archive is opened with the first of ids that matches; with
// none matching it returns a *seal.KeyError.
func Open(r io.ReaderAt, size int64, ids ...age.Identity) (*Reader, error) {
	if size < 0 {
		return nil, fmt.Errorf("archive: negative size %d", size)
	}
	l, err := readBounds(r, size, footerFixedSize)
	if err != nil {
		return nil, err
	}
	m, codecs, key, err := decodeHeader(l.header[:], l.manifest, l.version, ids)
	if err != nil {
		return nil, err
	}
	ar := &Reader{r: r, manifest: m, codecs: codecs, key: key}
	ar.packed, _ = codecID(m.Codec)

	fb, err := l.readFooter(r)
	if err != nil {
		return nil, err
	}
	f, err := decodeFooter(fb, l.version, key)
	if err != nil {
		return nil, err
	}
	if err := ar.buildIndex(f, l.dataStart, l.trailer.footerOff); err != nil {
		return nil, err
	}
	return ar, nil
}

// bounds are an archive's fixed parts around its frames: the header, the
// manifest's bytes and the trailer, read and checked against each other
// and the file's size. Open and CheckStructure both start from it.
type bounds struct {
	header    [headerFixedSize]byte
	version   uint32
	manifest  []byte // the manifest (or its envelope) and its checksum
	trailer   trailer
	dataStart int64 // where the first frame begins
}

// readBounds reads the bounds of the size-byte archive r, whose footer is
// at least minFooter bytes long.
func readBounds(r io.ReaderAt, size, minFooter int64) (*bounds, error) {
	if size < 0 {
		return nil, fmt.Errorf("archive: negative size %d", size)
	}
	b := &bounds{}
	n, err := r.ReadAt(b.header[:min(size, headerFixedSize)], 0)
	if n < len(headerMagic) {
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("archive: reading header: %w", err)
		}
		return nil, notArchive(b.header[:n])
	}
	if string(b.header[:8]) != headerMagic {
		return nil, notArchive(b.header[:n])
	}
	if n < headerFixedSize {
		return nil, &incompleteError{size: size}
	}
	b.version = binary.LittleEndian.Uint32(b.header[8:])
	if b.version == 0 {
		return nil, corruptf("archive: format version 0")
	}
	manLen := int64(binary.LittleEndian.Uint32(b.header[12:]))
	if b.trailer, err = readTrailer(r, size, b.version); err != nil {
		if b.version > FormatVersion {
			return nil, versionError(b.version)
		}
		return nil, err
	}
	t := b.trailer
	if b.version > FormatVersion {
		// The trailer repeats the version: a header that names a
		// version the trailer does not was damaged, not written by a
		// newer pgsprint.
		if t.version != b.version && t.version <= FormatVersion {
			return nil, corruptf("archive: the header is damaged: its format version field reads %d, the trailer's %d", b.version, t.version)
		}
		return nil, versionError(b.version)
	}
	if t.version != b.version {
		return nil, corruptf("archive: header says format version %d, trailer says %d", b.version, t.version)
	}
	if manLen > MaxManifestSize {
		return nil, corruptf("archive: manifest length %d exceeds the %d byte limit", manLen, MaxManifestSize)
	}
	b.dataStart = headerFixedSize + manLen + 4
	if t.footerLen < minFooter || t.footerOff < b.dataStart || t.footerOff+t.footerLen != size-trailerSize {
		return nil, corruptf("archive: trailer places the footer at %d+%d, which does not fit a %d byte file", t.footerOff, t.footerLen, size)
	}
	b.manifest = make([]byte, manLen+4)
	if err := readFull(r, b.manifest, headerFixedSize); err != nil {
		return nil, fmt.Errorf("archive: reading manifest: %w", err)
	}
	return b, nil
}

// readFooter reads the footer the trailer places and checks its checksum.
func (b *bounds) readFooter(r io.ReaderAt) ([]byte, error) {
	fb := make([]byte, b.trailer.footerLen)
	if err := readFull(r, fb, b.trailer.footerOff); err != nil {
		return nil, fmt.Errorf("archive: reading footer: %w", err)
	}
	if crc32c(fb) != b.trailer.footerCRC {
		return nil, corruptf("archive: footer checksum mismatch")
	}
	return fb, nil
}

// readTrailer reads and checks the last 32 bytes of an archive whose
// header says version.
func readTrailer(r io.ReaderAt, size int64, version uint32) (trailer, error) {
	if size < minArchiveLength {
		return trailer{}, &incompleteError{size: size}
	}
	var b [trailerSize]byte
	if err := readFull(r, b[:], size-trailerSize); err != nil {
		return trailer{}, fmt.Errorf("archive: reading trailer: %w", err)
	}
	if string(b[24:]) != trailerMagic {
		// A truncated file ends anywhere in a frame; a trailer whose
		// magic alone changed still places the footer just before
		// itself and repeats the header's version.
		off, n := binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[8:])
		if off < uint64(size) && n < uint64(size) && off+n == uint64(size-trailerSize) && binary.LittleEndian.Uint32(b[20:]) == version {
			return trailer{}, corruptf("archive: the trailer is damaged: its magic changed, though it places the footer where the file has one (not cut short)")
		}
		return trailer{}, &incompleteError{size: size}
	}
	off := binary.LittleEndian.Uint64(b[0:])
	n := binary.LittleEndian.Uint64(b[8:])
	if off > uint64(size) || n > uint64(size) {
		return trailer{}, corruptf("archive: trailer places the footer at %d+%d, beyond the end of a %d byte file", off, n, size)
	}
	return trailer{
		footerOff: int64(off),
		footerLen: int64(n),
		footerCRC: binary.LittleEndian.Uint32(b[16:]),
		version:   binary.LittleEndian.Uint32(b[20:]),
	}, nil
}

// buildIndex checks the footer's entries against each other and against the
// file frame, then builds the per-stream frame lists. Frames must tile the
// data area exactly, each stream's frames must carry seq 0, 1, 2, ... and
// end with one End frame, and the footer's totals must add up.
func (ar *Reader) buildIndex(f *footer, dataStart, dataEnd int64) error {
	if uint64(len(f.frames)) > math.MaxUint32 {
		return fmt.Errorf("archive: the footer lists %d frames, more than this reader can index", len(f.frames))
	}
	ar.streams = make([]streamEntry, len(f.streams))
	for i, s := range f.streams {
		if i > 0 && s.ID <= f.streams[i-1].ID {
			return corruptf("archive: footer lists streams out of order or twice (stream %d)", s.ID)
		}
		if !s.Kind.contentKind() {
			return corruptf("archive: footer gives stream %d invalid kind %d", s.ID, uint8(s.Kind))
		}
		ar.streams[i] = streamEntry{id: s.ID, kind: s.Kind, crc: s.CRC, rows: s.Rows, raw: s.RawBytes, stored: s.StoredBytes}
	}
	// A packed stream's entry names its Pack frame by its index in the
	// footer; the Reader keeps the Pack frames apart (packLocs).
	packAt := map[uint32]uint32{} // footer frame index -> index in packLocs
	type tally struct {
		frameState
		raw, stored int64
	}
	tallies := make([]tally, len(f.streams))
	for i, s := range f.streams {
		tallies[i].kind = s.Kind
	}
	off := dataStart
	for fi, e := range f.frames {
		where := func(format string, args ...any) error {
			return corruptf("archive: stream %d frame %d at offset %d: %s", e.stream, e.seq, e.off, fmt.Sprintf(format, args...))
		}
		if e.off != off {
			return where("footer says the frame starts at %d, but the previous frame ends at %d", e.off, off)
		}
		off += frameHeaderSize + int64(e.stored) + overhead(ar.key)
		if off > dataEnd {
			return where("frame runs past the footer at %d", dataEnd)
		}
		si, ok := ar.find(e.stream)
		if !ok {
			return where("stream is missing from the footer's stream list")
		}
		if e.kind == KindPack {
			h := e.header(0)
			if err := checkPackHeader(&h, &ar.codecs, ar.manifest.Codec, where); err != nil {
				return err
			}
			packAt[uint32(fi)] = uint32(len(ar.packLocs))
			ar.packLocs = append(ar.packLocs, packLoc{off: e.off, stream: e.stream, raw: e.raw, stored: e.stored, codec: e.codec})
			continue
		}
		if f.packs[si] != 0 {
			return where("the stream is packed, but has a frame of its own")
		}
		t := &tallies[si]
		h := e.header(t.kind)
		if err := t.check(&h, &ar.codecs, ar.manifest.Codec, where); err != nil {
			return err
		}
		if e.kind != KindEnd {
			t.raw += int64(e.raw)
			t.stored += int64(e.stored)
		}
	}
	if off != dataEnd {
		return corruptf("archive: frames end at %d but the footer starts at %d", off, dataEnd)
	}
	first := uint32(0)
	packStored := make([]int64, len(ar.packLocs))
	for i, s := range f.streams {
		t := tallies[i]
		if f.packs[i] != 0 {
			p, ok := packAt[f.packs[i]-1]
			if !ok {
				return corruptf("archive: footer places stream %d in frame %d, which is not a Pack frame", s.ID, f.packs[i]-1)
			}
			if s.Frames != 0 || s.StoredBytes < 0 {
				return corruptf("archive: footer entry of packed stream %d has impossible totals", s.ID)
			}
			ar.streams[i].pack = p + 1
			ar.streams[i].first = first
			ar.packLocs[p].members++
			packStored[p] += s.StoredBytes
			continue
		}
		switch {
		case !t.ended:
			return corruptf("archive: stream %d has no End frame", s.ID)
		case s.Frames != int(t.next)-1:
			return corruptf("archive: footer says stream %d has %d frames, the index lists %d", s.ID, s.Frames, int(t.next)-1)
		case s.RawBytes != t.raw || s.StoredBytes != t.stored:
			return corruptf("archive: footer totals of stream %d (%d raw, %d stored bytes) do not match its frames (%d, %d)",
				s.ID, s.RawBytes, s.StoredBytes, t.raw, t.stored)
		}
		ar.streams[i].first = first
		first += t.next
	}
	for p, loc := range ar.packLocs {
		if loc.members == 0 || packStored[p] != int64(loc.stored) {
			return corruptf("archive: pack at offset %d: the footer places %d streams in it, their stored bytes %d of its %d",
				loc.off, loc.members, packStored[p], loc.stored)
		}
	}
	// Every frame checked out, so each one's place is its stream's first
	// plus its seq, and its kind and codec follow from its place and
	// lengths (frameLoc).
	ar.frames = make([]frameLoc, first)
	for _, e := range f.frames {
		if e.kind == KindPack {
			continue
		}
		si, _ := ar.find(e.stream)
		ar.frames[ar.streams[si].first+e.seq] = frameLoc{off: e.off, raw: e.raw, stored: e.stored}
	}
	return nil
}

// readFull reads exactly len(b) bytes at off; an io.ReaderAt may return
// io.EOF together with a full read at the end of the file.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("short read at offset %d: %w", off, io.ErrUnexpectedEOF)
	}
	return err
}

// Manifest returns the manifest from the header. Callers must not modify
// it; it is shared by everyone using the Reader.
func (ar *Reader) Manifest() *Manifest { return ar.manifest }

// Streams lists every stream in id order.
func (ar *Reader) Streams() []StreamInfo {
	out := make([]StreamInfo, len(ar.streams))
	for i := range ar.streams {
		out[i] = ar.info(i)
	}
	return out
}

// Stream describes one stream, reporting false if the archive has none
// with that id.
func (ar *Reader) Stream(id uint32) (*StreamInfo, bool) {
	i, ok := ar.find(id)
	if !ok {
		return nil, false
	}
	s := ar.info(i)
	return &s, true
}

// decodeManifest checks the manifest bytes (JSON followed by its CRC-32C)
// against the header's version and prepares the decoders the frames may
// use: none, and the manifest's codec.
func decodeManifest(mb []byte, version uint32) (*Manifest, [codecGzip + 1]codec.Codec, error) {
	var codecs [codecGzip + 1]codec.Codec
	manLen := len(mb) - 4
	if crc32c(mb[:manLen]) != binary.LittleEndian.Uint32(mb[manLen:]) {
		return nil, codecs, corruptf("archive: manifest checksum mismatch")
	}
	js := mb[:manLen]
	if version >= formatPacked {
		var err error
		if js, err = unpackManifest(js); err != nil {
			return nil, codecs, corruptf("archive: manifest: %v", err)
		}
	}
	m, err := UnmarshalManifest(js)
	if err != nil {
		return nil, codecs, corruptf("archive: decoding manifest: %v", err)
	}
	if m.FormatVersion != int(version) {
		return nil, codecs, corruptf("archive: manifest says format version %d, header says %d", m.FormatVersion, version)
	}
	if _, ok := codecID(m.Codec); !ok {
		return nil, codecs, fmt.Errorf("archive: manifest names unknown compression method %q", m.Codec)
	}
	for _, name := range []string{"none", m.Codec} {
		c, err := codec.New(name, 0)
		if err != nil {
			return nil, codecs, fmt.Errorf("archive: %w", err)
		}
		cid, _ := codecID(name)
		codecs[cid] = c
	}
	return m, codecs, nil
}
