package archive

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"filippo.io/age"
)

var updateCorpus = flag.Bool("update-fuzz-corpus", false, "rewrite testdata/fuzz/FuzzOpen from freshly written archives")

const corpusDir = "testdata/fuzz/FuzzOpen"

// TestFuzzCorpus keeps the checked-in seeds honest: each must be a valid
// archive, so the fuzzer starts from real structure. Run with
// -update-fuzz-corpus after a format change to regenerate them.
func TestFuzzCorpus(t *testing.T) {
	for _, name := range []string{"zstd", "lz4", "gzip", "none"} {
		path := filepath.Join(corpusDir, "seed-"+name)
		if *updateCorpus {
			data, _ := seedArchive(t, name)
			if err := os.MkdirAll(corpusDir, 0o755); err != nil {
				t.Fatal(err)
			}
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		data, err := readCorpusFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test -run TestFuzzCorpus -update-fuzz-corpus)", path, err)
		}
		_, streams := seedArchive(t, name)
		if err := checkAll(t, data, streams); err != nil {
			t.Errorf("%s: %v (run go test -run TestFuzzCorpus -update-fuzz-corpus)", path, err)
		}
	}
}

// seedArchive is a minimal archive with every stream kind and more than
// one frame per stream; small seeds let the fuzzer mutate and minimize
// quickly.
func seedArchive(t testing.TB, codecName string, recipients ...age.Recipient) ([]byte, []testStream) {
	t.Helper()
	streams := []testStream{
		{id: 1, kind: KindSchema, data: []byte("PGDMP\x01\x0e")},
		{id: 2, kind: KindData, data: copyRows(1, 3), rows: 3},
		{id: 3, kind: KindData},
		{id: 4, kind: KindLargeObject, data: bytes.Repeat([]byte("lo "), 30)},
	}
	return writeArchive(t, mustCodec(t, codecName, 0), streams, 48, recipients...), streams
}

// readCorpusFile decodes a one-value "go test fuzz v1" file.
func readCorpusFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	const head = "go test fuzz v1\n[]byte("
	if !bytes.HasPrefix(b, []byte(head)) {
		return nil, fmt.Errorf("not a fuzz corpus file")
	}
	lit := bytes.TrimSuffix(bytes.TrimSpace(b[len(head):]), []byte(")"))
	s, err := strconv.Unquote(string(lit))
	if err != nil {
		return nil, fmt.Errorf("decoding corpus file: %w", err)
	}
	return []byte(s), nil
}

// FuzzOpen feeds arbitrary bytes to Open, every stream reader and Verify.
// None may panic, and no input may make them allocate beyond the format's
// caps; the checked-in seeds are real archives.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(headerMagic))
	_, streams := seedArchive(f, "zstd")
	f.Add(writePacked(f, "zstd", streams, 64, 128))
	f.Fuzz(func(t *testing.T, data []byte) {
		ar, err := Open(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, s := range ar.Streams() {
			rc := ar.OpenStream(s.ID)
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err == nil && n != s.RawBytes {
				t.Fatalf("stream %d: read %d bytes without error, footer says %d", s.ID, n, s.RawBytes)
			}
		}
		_ = ar.Verify(context.Background(), 2)
	})
}

// fuzzIdentity opens FuzzSealed's inputs. A key for tests only: the
// fuzzer's corpus stays readable from one run to the next.
const fuzzIdentity = "AGE-SECRET-KEY-1M0PJK6KWGM6C6758L6VKD5UCQ07AKK05GZ2FDVZKDJ0EHM4FMD9SWX8D2Z"

// FuzzSealed feeds arbitrary bytes, seeded with encrypted archives, to
// Open with the right identity, every stream reader, Verify, the
// sequential reader and the keyless structure check. None may panic or
// return wrong data without an error.
func FuzzSealed(f *testing.F) {
	id, err := age.ParseX25519Identity(fuzzIdentity)
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"zstd", "none"} {
		data, streams := seedArchive(f, name, id.Recipient())
		f.Add(data)
		f.Add(writePacked(f, name, streams, 64, 128, id.Recipient()))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = CheckStructure(bytes.NewReader(data), int64(len(data)))
		_, _ = readSequential(data, id)
		ar, err := Open(bytes.NewReader(data), int64(len(data)), id)
		if err != nil {
			return
		}
		for _, s := range ar.Streams() {
			rc := ar.OpenStream(s.ID)
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			if err == nil && n != s.RawBytes {
				t.Fatalf("stream %d: read %d bytes without error, footer says %d", s.ID, n, s.RawBytes)
			}
		}
		_ = ar.Verify(context.Background(), 2)
	})
}
