package archive

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/codec"
)

// testStream is one stream a test archive holds and what it should read
// back as.
type testStream struct {
	id   uint32
	kind Kind
	data []byte
	rows int64
}

// copyRows makes n COPY-text rows, deterministic per seed.
func copyRows(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d\tname-%d\t%d\t2024-%02d-%02d\n", i, rng.IntN(1000), rng.Int64(), rng.IntN(12)+1, rng.IntN(28)+1)
	}
	return b.Bytes()
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// testManifest describes streams the way the dump pipeline would.
func testManifest(streams []testStream) *Manifest {
	m := &Manifest{
		ToolVersion:  "test",
		Database:     "db",
		Encoding:     "UTF8",
		SnapshotTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		Tables:       []Table{{Schema: "public", Name: "t", Columns: []string{"a", "b"}}},
	}
	for _, s := range streams {
		switch s.kind {
		case KindData:
			m.Chunks = append(m.Chunks, Chunk{Stream: s.id, Table: 0})
		case KindLargeObject:
			m.LargeObjects = append(m.LargeObjects, LargeObject{Stream: s.id, OID: 16000 + s.id, Size: int64(len(s.data))})
		case KindSchema:
			m.SchemaStream = s.id
		}
	}
	return m
}

// writeArchive writes streams concurrently, one goroutine per stream,
// data streams through a BlockWriter fed one row per Write; encrypted to
// recipients if any.
func writeArchive(t testing.TB, c codec.Codec, streams []testStream, blockSize int, recipients ...age.Recipient) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, testManifest(streams), c, recipients...)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(streams))
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- writeStream(w, s, blockSize)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("writing stream: %v", err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Writer.Close: %v", err)
	}
	return out.Bytes()
}

func writeStream(w *Writer, s testStream, blockSize int) error {
	sw := w.Stream(s.kind, s.id)
	if s.kind != KindData {
		// Large objects and schema bytes go in directly, in uneven
		// pieces, through a reused buffer.
		buf := make([]byte, blockSize)
		for p := s.data; len(p) > 0; {
			n := copy(buf[:min(len(p), blockSize/2+len(p)%7+1)], p)
			if err := sw.WriteBlock(buf[:n], 0); err != nil {
				return err
			}
			clear(buf)
			p = p[n:]
		}
		return sw.Close()
	}
	bw := NewBlockWriter(sw, blockSize)
	for p := s.data; len(p) > 0; {
		n := bytes.IndexByte(p, '\n') + 1
		if _, err := bw.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	if err := bw.Close(); err != nil {
		return err
	}
	if bw.Rows() != s.rows {
		return fmt.Errorf("stream %d: BlockWriter counted %d rows, want %d", s.id, bw.Rows(), s.rows)
	}
	return nil
}

// standardStreams is a mix of every stream kind, including an empty one
// and an incompressible one.
func standardStreams(scale int) []testStream {
	var ss []testStream
	ss = append(ss, testStream{id: 1, kind: KindSchema, data: randomBytes(1, 300*scale)})
	for i := uint32(0); i < 6; i++ {
		n := int(i) * 40 * scale
		ss = append(ss, testStream{id: 10 + i, kind: KindData, data: copyRows(uint64(i), n), rows: int64(n)})
	}
	ss = append(ss, testStream{id: 100, kind: KindLargeObject, data: randomBytes(2, 700*scale)})
	ss = append(ss, testStream{id: 101, kind: KindLargeObject, data: bytes.Repeat([]byte("lo"), 500*scale)})
	ss = append(ss, testStream{id: 102, kind: KindLargeObject})
	return ss
}

// readAll opens data (with ids if encrypted) and reads every stream,
// returning the first error.
func readAll(data []byte, ids ...age.Identity) (map[uint32][]byte, error) {
	ar, err := Open(bytes.NewReader(data), int64(len(data)), ids...)
	if err != nil {
		return nil, err
	}
	got := map[uint32][]byte{}
	for _, s := range ar.Streams() {
		rc := ar.OpenStream(s.ID)
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return got, err
		}
		got[s.ID] = b
	}
	return got, nil
}

func mustCodec(t testing.TB, name string, level int) codec.Codec {
	t.Helper()
	c, err := codec.New(name, level)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// streamFrames is the footer entries of the frames of the stream at
// position i of ar's index, End last.
func (ar *Reader) streamFrames(i int) []frameEntry {
	out := make([]frameEntry, len(ar.frameRange(i)))
	for seq := range out {
		out[seq] = ar.entry(i, uint32(seq))
	}
	return out
}
