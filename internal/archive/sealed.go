package archive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/seal"
)

// Encrypted archives (docs/FORMAT.md, "Encryption"). The layout is that
// of a clear archive with three changes, all made here:
//
//   - the header's manifest region holds the envelope (the wrapped data
//     key, in clear) followed by the sealed manifest;
//   - every frame's payload is sealed after compression, so it is
//     seal.Overhead bytes longer on disk than its stored length says;
//   - the footer's entries are sealed behind its clear magic and counts.
//
// The writer seals in sealFrame, the readers open in openFrame: one place
// each, whatever else reads frames.

// formatSealed is the format version of an encrypted archive.
const formatSealed = 3

// envelopeMagic starts the manifest region of an encrypted archive.
const envelopeMagic = "PSEN"

// envelopeFixedSize is the envelope magic and length in front of it.
const envelopeFixedSize = 8

// frameADSize is how much of a frame header is bound to its payload: all
// but the two checksums (the payload's is computed over the sealed bytes).
const frameADSize = 24

// overhead is what sealing adds to each frame payload and to the footer.
func overhead(k *seal.Key) int64 {
	if k == nil {
		return 0
	}
	return seal.Overhead
}

// sealedHeader builds an encrypted archive's header for the manifest js:
// magic, version, region length, region (envelope and sealed manifest),
// CRC-32C of the region.
func sealedHeader(js []byte, version int, recipients []age.Recipient) ([]byte, *seal.Key, error) {
	key, env, err := seal.New(recipients...)
	if err != nil {
		return nil, nil, err
	}
	region := envelopeFixedSize + len(env) + len(js) + seal.Overhead
	if region > MaxManifestSize {
		return nil, nil, fmt.Errorf("archive: manifest is %d bytes, more than the %d byte limit", region, MaxManifestSize)
	}
	hdr := make([]byte, 0, headerFixedSize+region+4)
	hdr = append(hdr, headerMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(version))
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(region))
	hdr = append(hdr, envelopeMagic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(env)))
	hdr = append(hdr, env...)
	hdr = key.Seal(hdr, seal.PurposeManifest, 0, 0, hdr, js)
	hdr = binary.LittleEndian.AppendUint32(hdr, crc32c(hdr[headerFixedSize:]))
	return hdr, key, nil
}

// splitEnvelope checks the header region's checksum and, for an encrypted
// archive, splits it into the envelope and the sealed manifest. sealed is
// false for a clear archive (whose region is the manifest).
func splitEnvelope(mb []byte, version uint32) (env, manifest []byte, sealed bool, err error) {
	n := len(mb) - 4
	if version < formatSealed || n < envelopeFixedSize || string(mb[:4]) != envelopeMagic {
		if version == formatSealed {
			return nil, nil, false, corruptf("archive: format version %d without an encryption envelope", version)
		}
		return nil, mb, false, nil
	}
	if crc32c(mb[:n]) != binary.LittleEndian.Uint32(mb[n:]) {
		return nil, nil, false, corruptf("archive: header checksum mismatch (encryption envelope and manifest)")
	}
	e := int64(binary.LittleEndian.Uint32(mb[4:]))
	if e > seal.MaxEnvelopeSize || envelopeFixedSize+e+seal.Overhead > int64(n) {
		return nil, nil, false, corruptf("archive: encryption envelope length %d does not fit the %d byte header", e, n)
	}
	return mb[envelopeFixedSize : envelopeFixedSize+e], mb[envelopeFixedSize+e : n], true, nil
}

// decodeHeader is decodeManifest for clear and encrypted archives alike:
// hb is the fixed header, mb the manifest region and its CRC-32C. For an
// encrypted archive it unwraps the data key with ids (a *seal.KeyError
// when none matches) and opens the manifest, which authenticates
// everything in clear before it.
func decodeHeader(hb, mb []byte, version uint32, ids []age.Identity) (*Manifest, [codecGzip + 1]codec.Codec, *seal.Key, error) {
	env, sealedMan, sealed, err := splitEnvelope(mb, version)
	if err != nil || !sealed {
		if err != nil {
			return nil, [codecGzip + 1]codec.Codec{}, nil, err
		}
		m, codecs, err := decodeManifest(mb, version)
		return m, codecs, nil, err
	}
	key, err := seal.Unwrap(env, ids...)
	if err != nil {
		var kerr *seal.KeyError
		if errors.As(err, &kerr) {
			return nil, [codecGzip + 1]codec.Codec{}, nil, err
		}
		return nil, [codecGzip + 1]codec.Codec{}, nil, corruptf("archive: %v", err)
	}
	ad := make([]byte, 0, headerFixedSize+envelopeFixedSize+len(env))
	ad = append(append(ad, hb[:headerFixedSize]...), mb[:envelopeFixedSize+len(env)]...)
	js, err := key.Open(nil, seal.PurposeManifest, 0, 0, ad, sealedMan)
	if err != nil {
		return nil, [codecGzip + 1]codec.Codec{}, nil, corruptf("archive: manifest does not authenticate (header changed, or not sealed with this archive's key)")
	}
	m, codecs, err := decodeManifest(binary.LittleEndian.AppendUint32(js, crc32c(js)), version)
	return m, codecs, key, err
}

// sealFrame encrypts a frame's payload (after compression) and sets the
// header's payload checksum over the sealed bytes; buf is reused. For a
// clear archive it only sets the checksum.
func sealFrame(k *seal.Key, h *frameHeader, payload []byte, buf *[]byte) []byte {
	if k != nil {
		var hb [frameHeaderSize]byte
		h.marshal(&hb)
		*buf = k.Seal((*buf)[:0], seal.PurposeFrame, h.stream, h.seq, hb[:frameADSize], payload)
		payload = *buf
	}
	h.payloadCRC = crc32c(payload)
	return payload
}

// openFrame decrypts a frame's payload in place, checking that it was
// sealed under this archive's key at this stream and seq with this
// header. hb is the frame's 32 header bytes. A clear archive's payload is
// returned as it is.
func openFrame(k *seal.Key, hb, payload []byte) ([]byte, error) {
	if k == nil {
		return payload, nil
	}
	stream := binary.LittleEndian.Uint32(hb[8:])
	seq := binary.LittleEndian.Uint32(hb[12:])
	out, err := k.Open(payload[:0], seal.PurposeFrame, stream, seq, hb[:frameADSize], payload)
	if err != nil {
		return nil, errors.New("payload does not authenticate (changed, moved, or from another archive)")
	}
	return out, nil
}

// sealFooter encrypts the footer's entries behind its clear magic and
// counts.
func sealFooter(k *seal.Key, fb []byte) []byte {
	if k == nil {
		return fb
	}
	out := make([]byte, footerFixedSize, len(fb)+seal.Overhead)
	copy(out, fb[:footerFixedSize])
	return k.Seal(out, seal.PurposeFooter, 0, 0, fb[:footerFixedSize], fb[footerFixedSize:])
}

// openFooter reverses sealFooter.
func openFooter(k *seal.Key, fb []byte) ([]byte, error) {
	if k == nil {
		return fb, nil
	}
	if len(fb) < footerFixedSize+seal.Overhead {
		return nil, corruptf("archive: footer of %d bytes is too short for an encrypted archive", len(fb))
	}
	out := make([]byte, footerFixedSize, len(fb))
	copy(out, fb[:footerFixedSize])
	out, err := k.Open(out, seal.PurposeFooter, 0, 0, fb[:footerFixedSize], fb[footerFixedSize:])
	if err != nil {
		return nil, corruptf("archive: footer does not authenticate (changed, or from another archive)")
	}
	return out, nil
}

// OpenedBy says which of the reader's identities opened the archive
// (seal.Key.OpenedBy), or is empty for a clear archive.
func (ar *Reader) OpenedBy() string {
	if ar.key == nil {
		return ""
	}
	return ar.key.OpenedBy()
}

// CheckStructure checks an encrypted archive without its key: the header
// checksum and envelope, the trailer, the footer's checksum and counts,
// and every frame's header and payload checksum, its length and its place
// in its stream, frames tiling the data area exactly. It cannot check the
// authentication tags, decompression or totals: that needs the key. It
// returns what the envelope says in clear (seal.Info: a passphrase or
// keys; the recipients only for an older archive that lists them).
func CheckStructure(r io.ReaderAt, size int64) (seal.Info, error) {
	var info seal.Info
	l, err := readBounds(r, size, footerFixedSize+seal.Overhead)
	if err != nil {
		return info, err
	}
	env, _, sealed, err := splitEnvelope(l.manifest, l.version)
	if err != nil {
		return info, err
	}
	if !sealed {
		return info, errors.New("archive: not encrypted")
	}
	if info, err = seal.Inspect(env); err != nil {
		return info, corruptf("archive: %v", err)
	}
	fb, err := l.readFooter(r)
	if err != nil {
		return info, err
	}
	if string(fb[:4]) != footerMagic {
		return info, corruptf("archive: bad footer magic")
	}
	ns := uint64(binary.LittleEndian.Uint32(fb[4:]))
	nf := binary.LittleEndian.Uint64(fb[8:])
	if l.version >= formatPacked {
		// The entries are compressed: only their length can be checked.
		if len(fb) < footerFixedSize+footerLenSize || binary.LittleEndian.Uint64(fb[footerFixedSize:]) != uint64(len(fb)-footerFixedSize-footerLenSize) {
			return info, corruptf("archive: footer length %d does not match the length it records", len(fb))
		}
	} else if rest := uint64(len(fb) - footerFixedSize - seal.Overhead); ns > rest/streamEntrySize || nf > rest/frameEntrySize || ns*streamEntrySize+nf*frameEntrySize != rest {
		return info, corruptf("archive: footer length %d does not fit %d streams and %d frames", len(fb), ns, nf)
	}
	type seen struct {
		next  uint32
		ended bool
	}
	streams := map[uint32]*seen{}
	var frames, packs uint64
	var buf []byte
	for off := l.dataStart; off < l.trailer.footerOff; {
		var fh [frameHeaderSize]byte
		if off+frameHeaderSize > l.trailer.footerOff {
			return info, corruptf("archive: frame at offset %d runs past the footer at %d", off, l.trailer.footerOff)
		}
		if err := readFull(r, fh[:], off); err != nil {
			return info, fmt.Errorf("archive: frame at offset %d: %w", off, err)
		}
		h, err := parseFrameHeader(fh[:])
		if err != nil {
			return info, corruptf("archive: frame at offset %d: %v", off, err)
		}
		fail := func(format string, args ...any) error {
			return corruptf("archive: stream %d frame %d at offset %d: %s", h.stream, h.seq, off, fmt.Sprintf(format, args...))
		}
		if h.rawLen > MaxBlockSize || h.storedLen > MaxBlockSize {
			return info, fail("lengths %d/%d exceed the %d byte limit", h.rawLen, h.storedLen, MaxBlockSize)
		}
		st := streams[h.stream]
		if h.kind == KindPack {
			// Its streams are in its sealed directory.
			st = &seen{}
			packs++
		} else if st == nil {
			st = &seen{}
			streams[h.stream] = st
		}
		switch {
		case h.kind == KindPack && l.version < formatPacked:
			return info, fail("Pack frame in a format version %d archive", l.version)
		case st.ended:
			return info, fail("frame follows the stream's End frame")
		case h.seq != st.next:
			return info, fail("out of sequence (want seq %d)", st.next)
		case h.kind != KindEnd && h.kind != KindPack && !h.kind.contentKind():
			return info, fail("invalid kind %d", uint8(h.kind))
		}
		n := int64(h.storedLen) + seal.Overhead
		if off+frameHeaderSize+n > l.trailer.footerOff {
			return info, fail("frame runs past the footer at %d", l.trailer.footerOff)
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if err := readFull(r, buf, off+frameHeaderSize); err != nil {
			return info, fmt.Errorf("archive: stream %d frame %d at offset %d: %w", h.stream, h.seq, off, err)
		}
		if crc32c(buf) != h.payloadCRC {
			return info, fail("checksum mismatch")
		}
		st.next++
		st.ended = h.kind == KindEnd
		frames++
		off += frameHeaderSize + n
	}
	for id, st := range streams {
		if !st.ended {
			return info, corruptf("archive: stream %d has no End frame", id)
		}
	}
	if (packs == 0 && uint64(len(streams)) != ns) || uint64(len(streams)) > ns || frames != nf {
		return info, corruptf("archive: footer lists %d streams and %d frames, the archive has %d and %d", ns, nf, len(streams), frames)
	}
	return info, nil
}

// OpenedBy says which of the reader's identities opened the archive
// (seal.Key.OpenedBy), or is empty for a clear archive.
func (d *Demux) OpenedBy() string {
	if d.seq.key == nil {
		return ""
	}
	return d.seq.key.OpenedBy()
}
