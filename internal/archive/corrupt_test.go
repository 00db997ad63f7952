package archive

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"filippo.io/age"
)

// smallArchive is small enough to damage at every byte, yet has every
// stream kind, several frames per stream and both compressed and raw
// frames.
func smallArchive(t testing.TB, codecName string) ([]byte, []testStream) {
	t.Helper()
	streams := []testStream{
		{id: 1, kind: KindSchema, data: randomBytes(1, 40)},
		{id: 2, kind: KindData, data: copyRows(1, 12), rows: 12},
		{id: 3, kind: KindData},
		{id: 4, kind: KindLargeObject, data: bytes.Repeat([]byte("large object "), 20)},
	}
	return writeArchive(t, mustCodec(t, codecName, 0), streams, 128), streams
}

// checkAll opens data, reads every stream and verifies it. It returns nil
// only if everything succeeded, and fails the test if a stream read back
// without error but with the wrong content. ids open an encrypted archive.
func checkAll(t *testing.T, data []byte, want []testStream, ids ...age.Identity) error {
	t.Helper()
	ar, err := Open(bytes.NewReader(data), int64(len(data)), ids...)
	if err != nil {
		return err
	}
	got, err := readAll(data, ids...)
	if err != nil {
		return err
	}
	for _, s := range want {
		if b, ok := got[s.id]; ok && !bytes.Equal(b, s.data) {
			t.Fatalf("stream %d read back wrong data without an error", s.id)
		}
	}
	if len(got) != len(want) {
		return errors.New("stream count differs")
	}
	// Again through WriteTo, the path io.Copy takes.
	for _, s := range want {
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, ar.OpenStream(s.id)); err != nil {
			return err
		}
		if !bytes.Equal(buf.Bytes(), s.data) {
			t.Fatalf("stream %d copied back wrong data without an error", s.id)
		}
	}
	return ar.Verify(context.Background(), 2)
}

func TestTruncated(t *testing.T) {
	for _, name := range []string{"zstd", "none"} {
		data, streams := smallArchive(t, name)
		if err := checkAll(t, data, streams); err != nil {
			t.Fatalf("intact archive: %v", err)
		}
		for n := 0; n < len(data); n++ {
			err := checkAll(t, data[:n], streams)
			if err == nil {
				t.Fatalf("%s: truncated to %d of %d bytes: no error", name, n, len(data))
			}
			if !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrNotArchive) {
				t.Fatalf("%s: truncated to %d bytes: %v, want incomplete or not an archive", name, n, err)
			}
		}
	}
}

// TestFlippedByte damages every byte in turn: every damage must be
// reported by Open, a stream read or Verify, and must never read back as
// wrong data.
func TestFlippedByte(t *testing.T) {
	for _, name := range []string{"zstd", "lz4", "gzip", "none"} {
		data, streams := smallArchive(t, name)
		t.Logf("%s archive: %d bytes", name, len(data))
		for i := range data {
			for _, mask := range []byte{0x01, 0x80} {
				d := append([]byte{}, data...)
				d[i] ^= mask
				if err := checkAll(t, d, streams); err == nil {
					t.Fatalf("%s: byte %d ^ %#x: no error", name, i, mask)
				}
			}
		}
	}
}

// TestAppendedGarbage checks that bytes after the trailer are noticed.
func TestAppendedGarbage(t *testing.T) {
	data, streams := smallArchive(t, "zstd")
	if err := checkAll(t, append(append([]byte{}, data...), 0), streams); err == nil {
		t.Fatal("archive with a trailing byte accepted")
	}
}
