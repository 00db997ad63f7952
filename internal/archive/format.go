package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/seal"
)

// The byte layout below is specified in docs/FORMAT.md; keep the two in
// step. All integers are little-endian.
const (
	headerMagic  = "PGSPRNT\x00"
	frameMagic   = "PSFR"
	footerMagic  = "PSFT"
	trailerMagic = "PGSPEND\x00"

	// headerFixedSize is magic, version and manifest length; the manifest
	// and its CRC-32C follow.
	headerFixedSize  = 16
	frameHeaderSize  = 32
	endPayloadSize   = 28
	footerFixedSize  = 16
	streamEntrySize  = 48
	frameEntrySize   = 28
	trailerSize      = 32
	minArchiveLength = headerFixedSize + 4 + footerFixedSize + trailerSize
)

// MaxBlockSize is the largest raw or stored payload of one frame. Readers
// reject larger lengths before allocating, so a corrupted length field
// cannot make them allocate without bound.
const MaxBlockSize = codec.MaxBlockSize

// MaxManifestSize bounds the manifest JSON for the same reason.
const MaxManifestSize = 64 << 20

// DefaultBlockSize is the block size NewBlockWriter uses when given none:
// large enough for good compression, small enough that every worker's
// buffers stay a few MiB.
const DefaultBlockSize = 1 << 20

// Kind says what a frame carries. Data, Schema and LargeObject frames hold
// stream content; the End frame closes a stream with its totals.
type Kind uint8

// Frame kinds, as stored in the frame header. The numbers are part of the
// format and must never change.
const (
	KindData        Kind = 1 // COPY text rows of one chunk
	KindSchema      Kind = 2 // pg_dump custom-format archive bytes
	KindLargeObject Kind = 3 // bytes of one large object
	KindEnd         Kind = 4 // end of a stream, with its totals
	KindPack        Kind = 5 // the content of many small streams (pack.go)
)

// String names the kind for messages and listings.
func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindSchema:
		return "schema"
	case KindLargeObject:
		return "large object"
	case KindEnd:
		return "end"
	case KindPack:
		return "pack"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// contentKind reports whether k may be the kind of a stream.
func (k Kind) contentKind() bool {
	return k == KindData || k == KindSchema || k == KindLargeObject
}

// Codec ids as stored in frame headers. Frames whose compressed form would
// not be smaller than the raw block are stored with codecNone whatever the
// archive's codec is.
const (
	codecNone uint8 = 0
	codecZstd uint8 = 1
	codecLZ4  uint8 = 2
	codecGzip uint8 = 3
)

func codecID(name string) (uint8, bool) {
	switch name {
	case "none":
		return codecNone, true
	case "zstd":
		return codecZstd, true
	case "lz4":
		return codecLZ4, true
	case "gzip":
		return codecGzip, true
	}
	return 0, false
}

// ErrNotArchive is returned by Open for input that does not start with the
// archive magic.
var ErrNotArchive = errors.New("not a pgsprint archive")

// ErrIncomplete is returned by Open when the trailer is missing: the dump
// was interrupted, the file was truncated, or it is still being written.
var ErrIncomplete = errors.New("archive is incomplete: no trailer (truncated or still being written)")

// ErrCorrupt matches (with errors.Is) every error caused by bytes that do
// not check out: bad checksums, inconsistent lengths, totals or indexes.
var ErrCorrupt = errors.New("corrupted archive")

// On names the archive at where (a path, an object's URL, "standard
// input") in err, saying "archive" once: "archive on X is incomplete:
// ...", "archive on X is damaged: ..." for ErrCorrupt (without the cause's
// own "(corrupted archive)"), else "archive on X: <cause>" without the
// cause's leading "archive: ". It keeps err for errors.Is and errors.As.
func On(where string, err error) error {
	if err == nil {
		return nil
	}
	return &onError{where: where, err: err}
}

type onError struct {
	where string
	err   error
}

func (e *onError) Unwrap() error { return e.err }

func (e *onError) Error() string {
	msg := strings.TrimPrefix(e.err.Error(), "archive: ")
	if errors.Is(e.err, ErrCorrupt) {
		msg = strings.Replace(strings.Replace(msg, " (corrupted archive)", "", 1), ": archive: ", ": ", 1)
		if strings.Contains(msg, " is damaged") {
			return "archive on " + e.where + ": " + msg // "the header is damaged: ..."
		}
		return "archive on " + e.where + " is damaged: " + msg
	}
	if rest, ok := strings.CutPrefix(msg, "archive is "); ok {
		return "archive on " + e.where + " is " + rest
	}
	return "archive on " + e.where + ": " + msg
}

// incompleteError is ErrIncomplete with how many bytes arrived: the
// number a user compares with the archive's size to see where it was cut.
type incompleteError struct {
	size int64
	pipe bool // read front to back: the input ended, rather than the file
}

// Error says what arrived and the likely causes, once.
func (e *incompleteError) Error() string {
	if e.pipe {
		return fmt.Sprintf("archive is incomplete: the input ended after %d bytes, before the archive's trailer (cut off, or the dump writing it failed or is still running)", e.size)
	}
	return fmt.Sprintf("archive is incomplete: its %d bytes end without the archive's trailer (cut short, or the dump writing it failed or is still running)", e.size)
}

// Is makes errors.Is(err, ErrIncomplete) true.
func (e *incompleteError) Is(target error) bool { return target == ErrIncomplete }

// VersionError reports an archive written by a newer pgsprint, which this
// one must not guess at.
type VersionError struct {
	Version int
}

// Error names both versions so the user knows to upgrade pgsprint.
func (e *VersionError) Error() string {
	return fmt.Sprintf("archive format version %d is newer than this pgsprint understands (%d): read it with a newer pgsprint", e.Version, FormatVersion)
}

// maxPlausibleVersion bounds the format versions a newer pgsprint could
// have written: a header naming a larger one is damaged (a flipped bit in
// the version field), not from the future.
const maxPlausibleVersion = 255

// versionError is the error for a header whose version this reader does
// not know: a *VersionError if a newer pgsprint could have written it,
// else a damaged header.
func versionError(v uint32) error {
	if v > maxPlausibleVersion {
		return corruptf("archive: the header is damaged: its format version field reads %d, which no pgsprint writes", v)
	}
	return &VersionError{Version: int(v)}
}

// corruptError is a consistency failure; it reads "<what> (corrupted
// archive)" and matches ErrCorrupt.
type corruptError struct{ msg string }

// Error implements error.
func (e *corruptError) Error() string { return e.msg + " (corrupted archive)" }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

func corruptf(format string, args ...any) error {
	return &corruptError{msg: fmt.Sprintf(format, args...)}
}

// crc32c is the checksum used everywhere in the format. MakeTable returns
// the standard library's shared Castagnoli table, so this allocates once.
func crc32c(b []byte) uint32 {
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

func crc32cUpdate(crc uint32, b []byte) uint32 {
	return crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), b)
}

// frameHeader is the fixed 32-byte header in front of every payload.
type frameHeader struct {
	kind       Kind
	codec      uint8
	flags      uint16 // End frames: the stream's kind; otherwise 0
	stream     uint32
	seq        uint32
	rawLen     uint32
	storedLen  uint32
	payloadCRC uint32
}

func (h *frameHeader) marshal(b *[frameHeaderSize]byte) {
	copy(b[0:4], frameMagic)
	b[4] = byte(h.kind)
	b[5] = h.codec
	binary.LittleEndian.PutUint16(b[6:], h.flags)
	binary.LittleEndian.PutUint32(b[8:], h.stream)
	binary.LittleEndian.PutUint32(b[12:], h.seq)
	binary.LittleEndian.PutUint32(b[16:], h.rawLen)
	binary.LittleEndian.PutUint32(b[20:], h.storedLen)
	binary.LittleEndian.PutUint32(b[24:], h.payloadCRC)
	binary.LittleEndian.PutUint32(b[28:], crc32c(b[:28]))
}

// parseFrameHeader checks magic and header checksum; field plausibility is
// left to the caller, which knows what to expect.
func parseFrameHeader(b []byte) (frameHeader, error) {
	if string(b[0:4]) != frameMagic {
		return frameHeader{}, errors.New("bad frame magic")
	}
	if crc32c(b[:28]) != binary.LittleEndian.Uint32(b[28:]) {
		return frameHeader{}, errors.New("frame header checksum mismatch")
	}
	return frameHeader{
		kind:       Kind(b[4]),
		codec:      b[5],
		flags:      binary.LittleEndian.Uint16(b[6:]),
		stream:     binary.LittleEndian.Uint32(b[8:]),
		seq:        binary.LittleEndian.Uint32(b[12:]),
		rawLen:     binary.LittleEndian.Uint32(b[16:]),
		storedLen:  binary.LittleEndian.Uint32(b[20:]),
		payloadCRC: binary.LittleEndian.Uint32(b[24:]),
	}, nil
}

// endPayload is the End frame's content: the stream's totals, so that a
// reader can prove it saw every byte without trusting the footer alone.
type endPayload struct {
	rows   uint64
	raw    uint64
	frames uint64 // data frames before the End frame
	crc    uint32 // CRC-32C over all raw bytes of the stream in order
}

func (e *endPayload) marshal(b *[endPayloadSize]byte) {
	binary.LittleEndian.PutUint64(b[0:], e.rows)
	binary.LittleEndian.PutUint64(b[8:], e.raw)
	binary.LittleEndian.PutUint64(b[16:], e.frames)
	binary.LittleEndian.PutUint32(b[24:], e.crc)
}

func parseEndPayload(b []byte) endPayload {
	return endPayload{
		rows:   binary.LittleEndian.Uint64(b[0:]),
		raw:    binary.LittleEndian.Uint64(b[8:]),
		frames: binary.LittleEndian.Uint64(b[16:]),
		crc:    binary.LittleEndian.Uint32(b[24:]),
	}
}

// frameEntry is one frame's line in the footer index.
type frameEntry struct {
	off    int64
	stream uint32
	seq    uint32
	raw    uint32
	stored uint32
	kind   Kind
	codec  uint8
}

// StreamInfo describes one stream as recorded in the footer and confirmed
// by its End frame. Frames counts data frames, not the End frame;
// StoredBytes counts their payloads, not the frame headers.
type StreamInfo struct {
	ID          uint32
	Kind        Kind
	Rows        int64
	RawBytes    int64
	StoredBytes int64
	Frames      int
	CRC         uint32
}

// footer is the decoded index at the end of the archive.
type footer struct {
	streams []StreamInfo // sorted by ID
	packs   []uint32     // by stream: 1 + the index in frames of its Pack frame; 0 when not packed
	frames  []frameEntry // in file order
}

func (f *footer) size() int {
	return footerFixedSize + streamEntrySize*len(f.streams) + frameEntrySize*len(f.frames)
}

func (f *footer) marshal() []byte {
	b := make([]byte, f.size())
	copy(b[0:4], footerMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(f.streams)))
	binary.LittleEndian.PutUint64(b[8:], uint64(len(f.frames)))
	p := b[footerFixedSize:]
	for i, s := range f.streams {
		binary.LittleEndian.PutUint32(p[0:], s.ID)
		p[4] = byte(s.Kind)
		if i < len(f.packs) && f.packs[i] != 0 {
			p[5] = 1
			binary.LittleEndian.PutUint32(p[44:], f.packs[i]-1)
		}
		binary.LittleEndian.PutUint64(p[8:], uint64(s.Rows))
		binary.LittleEndian.PutUint64(p[16:], uint64(s.RawBytes))
		binary.LittleEndian.PutUint64(p[24:], uint64(s.StoredBytes))
		binary.LittleEndian.PutUint64(p[32:], uint64(s.Frames))
		binary.LittleEndian.PutUint32(p[40:], s.CRC)
		p = p[streamEntrySize:]
	}
	for _, e := range f.frames {
		binary.LittleEndian.PutUint64(p[0:], uint64(e.off))
		binary.LittleEndian.PutUint32(p[8:], e.stream)
		binary.LittleEndian.PutUint32(p[12:], e.seq)
		binary.LittleEndian.PutUint32(p[16:], e.raw)
		binary.LittleEndian.PutUint32(p[20:], e.stored)
		p[24] = byte(e.kind)
		p[25] = e.codec
		p = p[frameEntrySize:]
	}
	return b
}

// parseFooter decodes the index of an archive of the given format
// version and checks that its counts fit its length exactly; it does not
// check the entries against each other.
func parseFooter(b []byte, version uint32) (*footer, error) {
	if len(b) < footerFixedSize || string(b[0:4]) != footerMagic {
		return nil, corruptf("archive: bad footer magic")
	}
	ns := uint64(binary.LittleEndian.Uint32(b[4:]))
	nf := binary.LittleEndian.Uint64(b[8:])
	rest := uint64(len(b) - footerFixedSize)
	if ns > rest/streamEntrySize || nf > rest/frameEntrySize || ns*streamEntrySize+nf*frameEntrySize != rest {
		return nil, corruptf("archive: footer length %d does not fit %d streams and %d frames", len(b), ns, nf)
	}
	f := &footer{
		streams: make([]StreamInfo, ns),
		packs:   make([]uint32, ns),
		frames:  make([]frameEntry, nf),
	}
	p := b[footerFixedSize:]
	for i := range f.streams {
		packed := version >= formatPacked && p[5] == 1
		if (p[5] != 0 && !packed) || p[6] != 0 || p[7] != 0 || (!packed && binary.LittleEndian.Uint32(p[44:]) != 0) {
			return nil, corruptf("archive: footer stream entry %d has nonzero reserved bytes", i)
		}
		if packed {
			at := binary.LittleEndian.Uint32(p[44:])
			if uint64(at) >= nf {
				return nil, corruptf("archive: footer stream entry %d names frame %d of %d", i, at, nf)
			}
			f.packs[i] = at + 1
		}
		s := StreamInfo{
			ID:          binary.LittleEndian.Uint32(p[0:]),
			Kind:        Kind(p[4]),
			Rows:        int64(binary.LittleEndian.Uint64(p[8:])),
			RawBytes:    int64(binary.LittleEndian.Uint64(p[16:])),
			StoredBytes: int64(binary.LittleEndian.Uint64(p[24:])),
			CRC:         binary.LittleEndian.Uint32(p[40:]),
		}
		frames := binary.LittleEndian.Uint64(p[32:])
		if s.Rows < 0 || s.RawBytes < 0 || s.StoredBytes < 0 || frames > nf {
			return nil, corruptf("archive: footer entry of stream %d has impossible totals", s.ID)
		}
		s.Frames = int(frames)
		f.streams[i] = s
		p = p[streamEntrySize:]
	}
	for i := range f.frames {
		if binary.LittleEndian.Uint16(p[26:]) != 0 {
			return nil, corruptf("archive: footer frame entry %d has nonzero reserved bytes", i)
		}
		off := binary.LittleEndian.Uint64(p[0:])
		if off > 1<<62 {
			return nil, corruptf("archive: footer frame entry %d has impossible offset %d", i, off)
		}
		f.frames[i] = frameEntry{
			off:    int64(off),
			stream: binary.LittleEndian.Uint32(p[8:]),
			seq:    binary.LittleEndian.Uint32(p[12:]),
			raw:    binary.LittleEndian.Uint32(p[16:]),
			stored: binary.LittleEndian.Uint32(p[20:]),
			kind:   Kind(p[24]),
			codec:  p[25],
		}
		p = p[frameEntrySize:]
	}
	return f, nil
}

// trailer is the fixed block at the very end that locates the footer.
type trailer struct {
	footerOff int64
	footerLen int64
	footerCRC uint32
	version   uint32
}

func (t *trailer) marshal(b *[trailerSize]byte) {
	binary.LittleEndian.PutUint64(b[0:], uint64(t.footerOff))
	binary.LittleEndian.PutUint64(b[8:], uint64(t.footerLen))
	binary.LittleEndian.PutUint32(b[16:], t.footerCRC)
	binary.LittleEndian.PutUint32(b[20:], t.version)
	copy(b[24:], trailerMagic)
}

// footerLenSize is, from format version 5 on, the length of the footer's
// compressed entries, written after its fixed part so that a reader of a
// pipe knows how much to read.
const footerLenSize = 8

// encodeFooter is the footer as an archive of the given version holds it,
// sealed with k for an encrypted one: the entries as they are before
// version 5; from version 5 on, compressed (compressIndex) behind the
// fixed part and their length.
func encodeFooter(f *footer, version int, k *seal.Key) ([]byte, error) {
	fb := f.marshal()
	if version < formatPacked {
		return sealFooter(k, fb), nil
	}
	body, err := compressIndex(fb[footerFixedSize:])
	if err != nil {
		return nil, fmt.Errorf("archive: compressing the footer: %w", err)
	}
	out := make([]byte, footerFixedSize+footerLenSize, footerFixedSize+footerLenSize+len(body)+int(overhead(k)))
	copy(out, fb[:footerFixedSize])
	binary.LittleEndian.PutUint64(out[footerFixedSize:], uint64(len(body))+uint64(overhead(k)))
	if k == nil {
		return append(out, body...), nil
	}
	return k.Seal(out, seal.PurposeFooter, 0, 0, out, body), nil
}

// maxIndexRatio bounds how much larger than its compressed bytes a
// compressed footer may claim to be, so that a damaged count cannot make
// a reader allocate without bound: index entries compress about tenfold.
const maxIndexRatio = 1024

// decodeFooter reverses encodeFooter and parses the result.
func decodeFooter(fb []byte, version uint32, k *seal.Key) (*footer, error) {
	if version < formatPacked {
		plain, err := openFooter(k, fb)
		if err != nil {
			return nil, err
		}
		return parseFooter(plain, version)
	}
	const fixed = footerFixedSize + footerLenSize
	if len(fb) < fixed || string(fb[0:4]) != footerMagic {
		return nil, corruptf("archive: bad footer magic")
	}
	if n := binary.LittleEndian.Uint64(fb[footerFixedSize:]); n != uint64(len(fb)-fixed) {
		return nil, corruptf("archive: footer says its entries take %d bytes, they take %d", n, len(fb)-fixed)
	}
	body := fb[fixed:]
	if k != nil {
		var err error
		if body, err = k.Open(nil, seal.PurposeFooter, 0, 0, fb[:fixed], body); err != nil {
			return nil, corruptf("archive: footer does not authenticate (changed, or from another archive)")
		}
	}
	ns := uint64(binary.LittleEndian.Uint32(fb[4:]))
	nf := binary.LittleEndian.Uint64(fb[8:])
	if nf > 1<<40 {
		return nil, corruptf("archive: footer lists an impossible %d frames", nf)
	}
	raw := ns*streamEntrySize + nf*frameEntrySize
	if raw > max(1<<20, maxIndexRatio*uint64(len(body))) {
		return nil, corruptf("archive: footer of %d bytes claims %d bytes of entries", len(body), raw)
	}
	entries, err := decompressIndex(body, raw)
	if err != nil {
		return nil, corruptf("archive: footer: %v", err)
	}
	return parseFooter(append(fb[:footerFixedSize:footerFixedSize], entries...), version)
}
