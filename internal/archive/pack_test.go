package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
)

// packedStreams is what a dump of small tables and large objects writes:
// many tiny streams, empty ones, one that outgrows a pack's limit and
// another after it, and a schema stream of its own.
func packedStreams() []testStream {
	ss := []testStream{{id: 1, kind: KindSchema, data: randomBytes(1, 500)}}
	for i := uint32(0); i < 40; i++ {
		switch {
		case i%7 == 3:
			ss = append(ss, testStream{id: 10 + i, kind: KindData})
		case i%2 == 0:
			n := int(i%5) + 1
			ss = append(ss, testStream{id: 10 + i, kind: KindData, data: copyRows(uint64(i), n), rows: int64(n)})
		default:
			ss = append(ss, testStream{id: 10 + i, kind: KindLargeObject, data: []byte(fmt.Sprintf("large object %d %s", i, strings.Repeat("x", int(i))))})
		}
	}
	ss = append(ss, testStream{id: 60, kind: KindData, data: copyRows(99, 400), rows: 400})
	ss = append(ss, testStream{id: 61, kind: KindLargeObject, data: randomBytes(3, 3000)})
	ss = append(ss, testStream{id: 62, kind: KindLargeObject, data: []byte("after the big ones")})
	return ss
}

// writePacked writes streams as a dump worker does: the schema stream on
// its own, the others one after another through one Packer of the given
// limit, in packs of size raw bytes.
func writePacked(t testing.TB, codecName string, streams []testStream, limit, size int, recipients ...age.Recipient) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, testManifest(streams), mustCodec(t, codecName, 0), recipients...)
	if err != nil {
		t.Fatal(err)
	}
	p := w.Packer(limit, size)
	for _, s := range streams {
		if s.kind == KindSchema {
			err = writeStream(w, s, 256)
		} else {
			err = writeThrough(p, s, 256)
		}
		if err != nil {
			t.Fatalf("stream %d: %v", s.id, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// writeThrough writes s through p, data streams by a BlockWriter.
func writeThrough(p *Packer, s testStream, blockSize int) error {
	sw := p.Stream(s.kind, s.id)
	if s.kind != KindData {
		for b := s.data; len(b) > 0; {
			n := min(len(b), blockSize)
			if err := sw.WriteBlock(b[:n], 0); err != nil {
				return err
			}
			b = b[n:]
		}
		return sw.Close()
	}
	bw := NewBlockWriter(sw, blockSize)
	for b := s.data; len(b) > 0; {
		n := bytes.IndexByte(b, '\n') + 1
		if _, err := bw.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
	}
	return bw.Close()
}

// TestPacked writes small streams into packs and reads them back every
// way a restore does: by the footer (also many readers of one pack at
// once), front to back (Sequential, Demux), encrypted, and verified; a
// stream over the limit is written on its own, and the footer counts
// every pack's stored bytes among its streams.
func TestPacked(t *testing.T) {
	streams := packedStreams()
	ids, rs := testIdentities(t, 1)
	for _, tc := range []struct {
		name  string
		codec string
		rs    []age.Recipient
	}{
		{"zstd", "zstd", nil},
		{"none", "none", nil},
		{"lz4", "lz4", nil},
		{"encrypted", "zstd", rs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var id []age.Identity
			if tc.rs != nil {
				id = []age.Identity{ids[0]}
			}
			data := writePacked(t, tc.codec, streams, 1000, 2000, tc.rs...)
			if err := checkAll(t, data, streams, id...); err != nil {
				t.Fatal(err)
			}
			ar, err := Open(bytes.NewReader(data), int64(len(data)), id...)
			if err != nil {
				t.Fatal(err)
			}
			if len(ar.packLocs) < 2 {
				t.Errorf("%d packs, want several", len(ar.packLocs))
			}
			var stored int64
			for _, s := range streams {
				info, _ := ar.Stream(s.id)
				i, _ := ar.find(s.id)
				packed := ar.streams[i].pack != 0
				if want := s.kind != KindSchema && len(s.data) <= 1000; packed != want {
					t.Errorf("stream %d of %d bytes: packed %v, want %v", s.id, len(s.data), packed, want)
				}
				if info.Rows != s.rows || info.RawBytes != int64(len(s.data)) {
					t.Errorf("stream %d: %d rows, %d bytes; want %d, %d", s.id, info.Rows, info.RawBytes, s.rows, len(s.data))
				}
				if packed {
					stored += info.StoredBytes
				}
			}
			var packs int64
			for _, p := range ar.packLocs {
				packs += int64(p.stored)
			}
			if stored != packs {
				t.Errorf("packed streams count %d stored bytes, their packs hold %d", stored, packs)
			}

			// Many readers of the streams at once decompress each pack once.
			ar, err = Open(bytes.NewReader(data), int64(len(data)), id...)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, s := range streams {
						b, err := io.ReadAll(ar.OpenStream(s.id))
						if err != nil || !bytes.Equal(b, s.data) {
							t.Errorf("stream %d: %v, or wrong bytes", s.id, err)
						}
					}
				}()
			}
			wg.Wait()
			if n := ar.packs.loads; n != len(ar.packLocs) {
				t.Errorf("4 readers of every stream decompressed %d packs, the archive has %d", n, len(ar.packLocs))
			}

			got, err := readSequential(data, id...)
			if err != io.EOF {
				t.Fatalf("sequential read: %v", err)
			}
			d, err := NewDemux(bytes.NewReader(data), t.TempDir(), id...)
			if err != nil {
				t.Fatal(err)
			}
			var all []uint32
			for _, s := range streams {
				all = append(all, s.id)
			}
			dgot, derrs := demuxAll(t, d, all, 3)
			if err := d.Finish(); err != nil {
				t.Fatalf("Demux.Finish: %v", err)
			}
			for _, s := range streams {
				if !bytes.Equal(got[s.id], s.data) {
					t.Errorf("stream %d read front to back wrong", s.id)
				}
				if derrs[s.id] != nil || !bytes.Equal(dgot[s.id], s.data) {
					t.Errorf("stream %d through the Demux: %v, or wrong bytes", s.id, derrs[s.id])
				}
				info, ok := d.Stream(s.id)
				want, _ := ar.Stream(s.id)
				if !ok || *info != *want {
					t.Errorf("stream %d: Demux totals %+v, footer %+v", s.id, info, want)
				}
			}
			if tc.rs != nil {
				if _, err := CheckStructure(bytes.NewReader(data), int64(len(data))); err != nil {
					t.Errorf("CheckStructure: %v", err)
				}
			}
		})
	}
}

// TestPackedEveryByte flips every byte of a small packed archive, and of
// its encrypted twin every byte after the header (TestSealedEveryByte
// covers the envelope): each flip is refused by the footer reader, the
// front-to-back reader and Verify, and nothing reads back wrong.
func TestPackedEveryByte(t *testing.T) {
	t.Parallel()
	streams := []testStream{
		{id: 1, kind: KindSchema, data: []byte("schema")},
		{id: 2, kind: KindData, data: copyRows(1, 3), rows: 3},
		{id: 3, kind: KindData},
		{id: 4, kind: KindLargeObject, data: []byte("a large object")},
		{id: 5, kind: KindLargeObject, data: bytes.Repeat([]byte("more "), 50)},
	}
	ids, rs := testIdentities(t, 1)
	for _, enc := range []bool{false, true} {
		var data []byte
		var id []age.Identity
		if enc {
			data, id = writePacked(t, "zstd", streams, 100, 1000, rs...), []age.Identity{ids[0]}
		} else {
			data = writePacked(t, "zstd", streams, 100, 1000)
		}
		if err := checkAll(t, data, streams, id...); err != nil {
			t.Fatal(err)
		}
		from := 0
		if enc {
			from = sealedLayout(t, data).dataStart
		}
		for i := from; i < len(data); i++ {
			d := append([]byte{}, data...)
			d[i] ^= 0x20
			if err := checkAll(t, d, streams, id...); err == nil {
				t.Fatalf("encrypted %v: byte %d flipped: no error", enc, i)
			}
			got, err := readSequential(d, id...)
			if err == io.EOF {
				t.Fatalf("encrypted %v: byte %d flipped: the sequential reader found nothing wrong", enc, i)
			}
			for _, s := range streams {
				if b, ok := got[s.id]; ok && len(b) > len(s.data) {
					t.Fatalf("encrypted %v: byte %d flipped: stream %d grew", enc, i, s.id)
				}
			}
		}
	}
}

// TestPackedVerifyNames: Verify names the damaged pack.
func TestPackedVerifyNames(t *testing.T) {
	streams := packedStreams()
	data := writePacked(t, "zstd", streams, 1000, 2000)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	p := ar.packLocs[0]
	data[p.off+frameHeaderSize+2] ^= 1
	if ar, err = Open(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	err = ar.Verify(context.Background(), 2)
	want := fmt.Sprintf("pack at offset %d: checksum mismatch", p.off)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Verify: %v", err)
	} else if n := strings.Count(err.Error(), want); n != 1 || !strings.Contains(err.Error(), "more stream(s) of the same pack") {
		// One damaged pack is one problem, however many streams it holds.
		t.Errorf("Verify names the damaged pack %d times, want once with its other streams counted: %v", n, err)
	}
}

// TestPackerMustClose: a stream in a pack not written yet is still open,
// so the archive cannot be closed without it.
func TestPackerMustClose(t *testing.T) {
	var out bytes.Buffer
	streams := []testStream{{id: 1, kind: KindLargeObject, data: []byte("x")}}
	w, err := NewWriter(&out, testManifest(streams), mustCodec(t, "zstd", 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := writeThrough(w.Packer(0, 0), streams[0], 256); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "1 stream(s) opened but not closed") {
		t.Errorf("Close: %v", err)
	}
}

// TestPackedConcurrentWorkers writes the streams as a dump does with
// several workers: each its own Packer, all into one Writer at once, with
// ordinary frames of other workers landing between a pack's frame and its
// footer entries. Every stream must read back from the pack it is in (a
// race once indexed a pack's streams at another worker's frame).
func TestPackedConcurrentWorkers(t *testing.T) {
	const workers = 4
	var streams []testStream
	for i := uint32(0); i < 400; i++ {
		switch {
		case i%10 == 0: // big: ordinary frames, written while the others pack
			streams = append(streams, testStream{id: 10 + i, kind: KindLargeObject, data: randomBytes(uint64(i), 5000)})
		default:
			n := int(i%4) + 1
			streams = append(streams, testStream{id: 10 + i, kind: KindData, data: copyRows(uint64(i), n), rows: int64(n)})
		}
	}
	for round := 0; round < 20; round++ {
		var out bytes.Buffer
		w, err := NewWriter(&out, testManifest(streams), mustCodec(t, "zstd", 0))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for k := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := w.Packer(1000, 2000)
				for i := k; i < len(streams); i += workers {
					if err := writeThrough(p, streams[i], 256); err != nil {
						errs[k] = err
						return
					}
				}
				errs[k] = p.Close()
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := checkAll(t, out.Bytes(), streams); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
