package archive

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		codec     string
		level     int
		blockSize int
	}{
		{"none", 0, 4096},
		{"zstd", 0, 4096},
		{"zstd", 19, 64 << 10},
		{"lz4", 0, 4096},
		{"lz4", 9, 1000},
		{"gzip", 0, 4096},
		{"gzip", 1, 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.codec, func(t *testing.T) {
			streams := standardStreams(50)
			data := writeArchive(t, mustCodec(t, tt.codec, tt.level), streams, tt.blockSize)
			ar, err := Open(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if m := ar.Manifest(); m.Codec != tt.codec || m.FormatVersion != formatPacked {
				t.Errorf("manifest codec %q version %d", m.Codec, m.FormatVersion)
			}
			if got := len(ar.Streams()); got != len(streams) {
				t.Fatalf("%d streams, want %d", got, len(streams))
			}
			for _, s := range streams {
				info, ok := ar.Stream(s.id)
				if !ok {
					t.Fatalf("stream %d missing", s.id)
				}
				if info.Kind != s.kind || info.Rows != s.rows || info.RawBytes != int64(len(s.data)) {
					t.Errorf("stream %d: info %+v, want kind %v rows %d raw %d", s.id, *info, s.kind, s.rows, len(s.data))
				}
				rc := ar.OpenStream(s.id)
				got, err := io.ReadAll(rc)
				if err != nil {
					t.Fatalf("stream %d: %v", s.id, err)
				}
				if err := rc.Close(); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, s.data) {
					t.Fatalf("stream %d: read %d bytes that differ from the %d written", s.id, len(got), len(s.data))
				}
			}
			if err := ar.Verify(context.Background(), 3); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestConcurrentReaders reads all streams at once, as restore does.
func TestConcurrentReaders(t *testing.T) {
	streams := standardStreams(30)
	data := writeArchive(t, mustCodec(t, "zstd", 0), streams, 2048)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, len(streams))
	for _, s := range streams {
		go func() {
			got, err := io.ReadAll(ar.OpenStream(s.id))
			if err == nil && !bytes.Equal(got, s.data) {
				err = errors.New("content mismatch")
			}
			errs <- err
		}()
	}
	for range streams {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFramesCutAtRows checks the BlockWriter's promise: data frames end
// with '\n' and are about the block size.
func TestFramesCutAtRows(t *testing.T) {
	rows := copyRows(1, 2000)
	streams := []testStream{{id: 1, kind: KindData, data: rows, rows: 2000}}
	const block = 3000
	data := writeArchive(t, mustCodec(t, "none", 0), streams, block)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	frames := ar.streamFrames(0)
	for i, e := range frames[:len(frames)-1] {
		payload := data[e.off+frameHeaderSize : e.off+frameHeaderSize+int64(e.stored)]
		if payload[len(payload)-1] != '\n' {
			t.Errorf("frame %d does not end at a row boundary", i)
		}
		if i < len(frames)-2 && (e.raw < block || e.raw > block+100) {
			t.Errorf("frame %d has %d raw bytes, want about %d", i, e.raw, block)
		}
	}
}

// TestIncompressibleStoredRaw checks that blocks which do not shrink are
// stored with codec none, so stored size never exceeds raw size.
func TestIncompressibleStoredRaw(t *testing.T) {
	for _, name := range []string{"lz4", "zstd", "gzip"} {
		t.Run(name, func(t *testing.T) {
			streams := []testStream{
				{id: 1, kind: KindLargeObject, data: randomBytes(5, 50000)},
				{id: 2, kind: KindLargeObject, data: bytes.Repeat([]byte("abc"), 20000)},
			}
			data := writeArchive(t, mustCodec(t, name, 0), streams, 8192)
			ar, err := Open(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			id, _ := codecID(name)
			for si, wantCodec := range []uint8{codecNone, id} {
				for _, e := range ar.streamFrames(si) {
					if e.kind != KindEnd && e.codec != wantCodec {
						t.Errorf("stream %d frame %d stored with codec %d, want %d", si+1, e.seq, e.codec, wantCodec)
					}
				}
			}
			if info, _ := ar.Stream(1); info.StoredBytes != info.RawBytes {
				t.Errorf("random stream stored %d bytes for %d raw", info.StoredBytes, info.RawBytes)
			}
			if info, _ := ar.Stream(2); info.StoredBytes >= info.RawBytes/4 {
				t.Errorf("repetitive stream stored %d bytes for %d raw", info.StoredBytes, info.RawBytes)
			}
			got, err := readAll(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range streams {
				if !bytes.Equal(got[s.id], s.data) {
					t.Errorf("stream %d mismatch", s.id)
				}
			}
		})
	}
}

func TestEmptyArchive(t *testing.T) {
	data := writeArchive(t, mustCodec(t, "zstd", 0), nil, 1024)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(ar.Streams()) != 0 {
		t.Errorf("streams in an empty archive")
	}
	if err := ar.Verify(context.Background(), 0); err != nil {
		t.Error(err)
	}
}

func TestOpenErrors(t *testing.T) {
	good := writeArchive(t, mustCodec(t, "zstd", 0), standardStreams(1), 512)
	patch := func(off int, b ...byte) []byte {
		d := append([]byte{}, good...)
		copy(d[off:], b)
		return d
	}
	version := binary.LittleEndian.Uint32(good[8:])
	newer := patch(8, 7, 0, 0, 0)
	copy(newer[len(newer)-12:], []byte{7, 0, 0, 0}) // the trailer repeats it
	tests := []struct {
		name  string
		data  []byte
		want  string
		match error
	}{
		{"empty", nil, "not a pgsprint archive: it is empty (0 bytes): the dump meant to write it wrote nothing", ErrNotArchive},
		{"text", []byte("hello, world, this is not it"), `not a pgsprint archive: it is a file of another kind: it begins with "hello, w", a pgsprint archive with`, ErrNotArchive},
		{"magic only", []byte(headerMagic), "archive is incomplete: its 8 bytes end without the archive's trailer (cut short, or the dump writing it failed or is still running)", ErrIncomplete},
		{"truncated", good[:len(good)-1], fmt.Sprintf("archive is incomplete: its %d bytes end without", len(good)-1), ErrIncomplete},
		{"newer version", newer, fmt.Sprintf("archive format version 7 is newer than this pgsprint understands (%d): read it with a newer pgsprint", FormatVersion), nil},
		// A flipped bit is damage, not a version from the future, nor a cut.
		{"version field flipped", patch(10, 1), fmt.Sprintf("the header is damaged: its format version field reads %d, the trailer's %d", version|1<<16, version), ErrCorrupt},
		{"version field flipped, no trailer", patch(10, 1)[:len(good)-40], fmt.Sprintf("the header is damaged: its format version field reads %d, which no pgsprint writes", version|1<<16), ErrCorrupt},
		{"newer version, plausible, no trailer", newer[:len(good)-40], "archive format version 7 is newer", nil},
		{"trailer magic flipped", patch(len(good)-1, 1), "the trailer is damaged: its magic changed", ErrCorrupt},
		// pg_dump's formats, named with the tool that reads them.
		{"pg_dump -Fc", []byte("PGDMP\x01\x10\x00\x04\x08\x01\x01\x01\x00\x00\x00"), "not a pgsprint archive: it is a pg_dump custom-format archive (pg_dump -Fc): restore it with pg_restore", ErrNotArchive},
		{"pg_dump -Fd's toc.dat", []byte("PGDMP\x01\x10\x00\x04\x08\x05\x01\x01\x00\x00\x00"), "not a pgsprint archive: it is the toc.dat of a pg_dump directory-format archive (pg_dump -Fd): restore it with pg_restore on its directory", ErrNotArchive},
		{"pg_dump -Ft", append([]byte("toc.dat\x00"), make([]byte, 504)...), "it is a pg_dump tar-format archive (pg_dump -Ft): restore it with pg_restore", ErrNotArchive},
		{"pg_dump plain", []byte("--\n-- PostgreSQL database dump\n--\n"), "it is a plain SQL script from pg_dump or pg_dumpall: run it with psql -f FILE", ErrNotArchive},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6}, "it is gzip-compressed data", ErrNotArchive},
		{"version zero", patch(8, 0, 0, 0, 0), "format version 0", ErrCorrupt},
		{"trailer version", patch(len(good)-12, 2, 0, 0, 0), "trailer says 2", ErrCorrupt},
		{"huge manifest length", patch(12, 0xff, 0xff, 0xff, 0xff), "manifest length", ErrCorrupt},
		{"footer offset", patch(len(good)-32, 0xff), "trailer places the footer", ErrCorrupt},
		{"footer checksum", patch(len(good)-16, 0xff), "footer checksum mismatch", ErrCorrupt},
		{"manifest byte", patch(headerFixedSize+3, 'X'), "manifest checksum mismatch", ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(bytes.NewReader(tt.data), int64(len(tt.data)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open error = %v, want containing %q", err, tt.want)
			}
			if tt.match != nil && !errors.Is(err, tt.match) {
				t.Errorf("error %v does not match %v", err, tt.match)
			}
			if tt.name == "newer version" {
				var ve *VersionError
				if !errors.As(err, &ve) || ve.Version != 7 {
					t.Errorf("error %v is not a VersionError for 7", err)
				}
			}
		})
	}
}

// TestFrameErrorMessage checks that payload damage names stream, frame and
// offset, and surfaces from Read instead of io.EOF.
func TestFrameErrorMessage(t *testing.T) {
	streams := []testStream{{id: 12, kind: KindData, data: copyRows(3, 500), rows: 500}}
	data := writeArchive(t, mustCodec(t, "zstd", 0), streams, 2000)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	e := ar.streamFrames(0)[3]
	data[e.off+frameHeaderSize+5] ^= 0x40
	_, err = io.ReadAll(ar.OpenStream(12))
	want := "archive: stream 12 frame 3 at offset " + itoa(e.off) + ": checksum mismatch (corrupted archive)"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("error does not match ErrCorrupt")
	}
	if _, err := io.Copy(io.Discard, ar.OpenStream(12)); err == nil || err.Error() != want {
		t.Errorf("io.Copy error = %v, want %q", err, want)
	}
	verr := ar.Verify(context.Background(), 2)
	if verr == nil || !strings.Contains(verr.Error(), want) || !errors.Is(verr, ErrCorrupt) {
		t.Errorf("Verify = %v, want %q", verr, want)
	}
}

func itoa(n int64) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}

func TestOpenStreamUnknown(t *testing.T) {
	data := writeArchive(t, mustCodec(t, "none", 0), standardStreams(1), 512)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ar.Stream(999); ok {
		t.Error("Stream(999) found")
	}
	_, err = io.ReadAll(ar.OpenStream(999))
	if err == nil || !strings.Contains(err.Error(), "no stream 999") {
		t.Errorf("error = %v", err)
	}
}

func TestVerifyManifestMismatch(t *testing.T) {
	var out bytes.Buffer
	m := testManifest([]testStream{{id: 1, kind: KindData}, {id: 2, kind: KindData}, {id: 3, kind: KindLargeObject}})
	w, err := NewWriter(&out, m, mustCodec(t, "lz4", 0))
	if err != nil {
		t.Fatal(err)
	}
	// Stream 1 as planned, stream 2 never written, stream 3 of the wrong kind.
	for _, s := range []struct {
		kind Kind
		id   uint32
	}{{KindData, 1}, {KindData, 3}} {
		if err := w.Stream(s.kind, s.id).Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ar, err := Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	err = ar.Verify(context.Background(), 1)
	for _, want := range []string{"chunk 1 refers to stream 2, which the archive lacks", "large object 16003 refers to stream 3, which holds data, not large object"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Verify = %v, want containing %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Verify error spans lines: %q", err)
	}
}

func TestVerifyCanceled(t *testing.T) {
	data := writeArchive(t, mustCodec(t, "zstd", 0), standardStreams(5), 512)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ar.Verify(ctx, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("Verify = %v, want context.Canceled", err)
	}
}
