// Package archivetest is the conformance suite every archive.Source
// implementation must pass: the seekable Reader over a medium with random
// access, the Demux over one read front to back, clone's live source, and
// whatever reads archives tomorrow. An implementation's package runs it
// from a _test.go file: RunBytes for sources that read archive bytes
// (round trip, truncation at every frame boundary, a flipped byte in each
// region, early stop, cancellation, concurrent readers), RunLive for
// sources that are not made of archive bytes (clone's: round trip, early
// stop, concurrent readers). Only tests import this package.
package archivetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/codec"
)

// Stream is one stream of an archive and what it must read back as.
type Stream struct {
	ID   uint32
	Kind archive.Kind
	Data []byte
	Rows int64
}

// Opener opens archive bytes the way the implementation under test reads
// them (on a file, through a pipe, ...). It returns the source and what
// releases it, or the error opening failed with. A cancelled ctx must
// make it fail with ctx's error.
type Opener func(ctx context.Context, t *testing.T, data []byte) (archive.Source, func(), error)

// RunBytes runs the suite for a source of archive bytes.
func RunBytes(t *testing.T, open Opener) {
	data, streams := Archive(t)
	t.Run("RoundTrip", func(t *testing.T) {
		src, done, err := open(t.Context(), t, data)
		if err != nil {
			t.Fatalf("open a sound archive: %v", err)
		}
		defer done()
		if err := readAll(t, src, streams); err != nil {
			t.Fatalf("read a sound archive: %v", err)
		}
	})
	t.Run("TruncatedAtEveryFrameBoundary", func(t *testing.T) {
		for _, cut := range boundaries(t, data) {
			err := consume(t, open, data[:cut], streams)
			if !errors.Is(err, archive.ErrIncomplete) {
				t.Errorf("archive cut at byte %d of %d: %v, want an incomplete archive", cut, len(data), err)
			}
		}
	})
	t.Run("FlippedByteInEachRegion", func(t *testing.T) {
		for _, f := range flips(t, data) {
			bad := bytes.Clone(data)
			bad[f.at] ^= 0x01
			err := consume(t, open, bad, streams)
			// Said as damage: by the reader ("(corrupted archive)"), or by
			// the archive's name (archive.On: "archive on X is damaged").
			if msg := err.Error(); !errors.Is(err, archive.ErrCorrupt) || !strings.Contains(msg, "corrupted archive") && !strings.Contains(msg, " is damaged") {
				t.Errorf("byte %d (%s) flipped: %v, want a corrupted archive", f.at, f.region, err)
			}
		}
	})
	t.Run("StopsEarly", func(t *testing.T) {
		src, done, err := open(t.Context(), t, data)
		if err != nil {
			t.Fatal(err)
		}
		defer done()
		stopEarly(t, src, streams)
		// The archive is whole: what was not read is still checked.
		if f, ok := src.(archive.Finisher); ok {
			if err := f.Finish(); err != nil {
				t.Fatalf("Finish after readers stopped early: %v", err)
			}
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		src, done, err := open(ctx, t, data)
		if err == nil {
			done()
			t.Fatalf("opened with a cancelled context: %T", src)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("open with a cancelled context: %v, want context.Canceled", err)
		}
	})
}

// RunLive runs the suite for a source that is not made of archive bytes:
// open returns a fresh source each time, holding want.
func RunLive(t *testing.T, open func(t *testing.T) archive.Source, want []Stream) {
	t.Run("RoundTrip", func(t *testing.T) {
		if err := readAll(t, open(t), want); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("StopsEarly", func(t *testing.T) {
		src := open(t)
		stopEarly(t, src, want)
		// Finish may refuse (a live source was not read whole) but
		// must neither hang nor succeed silently with streams unread.
		if f, ok := src.(archive.Finisher); ok {
			if err := f.Finish(); err == nil && len(want) > 1 {
				t.Log("Finish accepted a source read in part")
			}
		}
	})
}

// readAll reads every stream at once, one goroutine each, checks each
// against want and its totals, then Finish. It fails the test if a
// stream reads back wrong without an error.
func readAll(t *testing.T, src archive.Source, want []Stream) error {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(want))
	for i, s := range want {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = readStream(t, src, s)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if f, ok := src.(archive.Finisher); ok {
		return f.Finish()
	}
	return nil
}

// readStream reads one stream whole; on success it must equal want and
// the source must know its totals.
func readStream(t *testing.T, src archive.Source, want Stream) error {
	r := src.OpenStream(want.ID)
	defer r.Close()
	var got bytes.Buffer
	if _, err := io.Copy(&got, r); err != nil {
		return err
	}
	if !bytes.Equal(got.Bytes(), want.Data) {
		t.Errorf("stream %d read back %d bytes without an error, want %d equal ones", want.ID, got.Len(), len(want.Data))
		return nil
	}
	info, ok := src.Stream(want.ID)
	switch {
	case !ok:
		t.Errorf("stream %d read to its end, but the source has no totals", want.ID)
	case info.Rows != want.Rows || info.RawBytes != int64(len(want.Data)):
		t.Errorf("stream %d totals: %d rows, %d bytes; want %d, %d", want.ID, info.Rows, info.RawBytes, want.Rows, len(want.Data))
	}
	return nil
}

// consume opens data and reads all of it as a restore would, returning
// the first error: opening, reading a stream, or finishing. A stream that
// reads back wrong without an error fails the test.
func consume(t *testing.T, open Opener, data []byte, want []Stream) error {
	t.Helper()
	src, done, err := open(t.Context(), t, data)
	if err != nil {
		return err
	}
	defer done()
	ch := make(chan error, 1)
	go func() { ch <- readAll(t, src, want) }()
	select {
	case err := <-ch:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("reading a damaged archive of %d bytes hangs", len(data))
		return nil
	}
}

// stopEarly opens every stream, reads a little of some, closes them all,
// and then reads one again from a fresh open where the source allows it.
func stopEarly(t *testing.T, src archive.Source, want []Stream) {
	t.Helper()
	for i, s := range want {
		r := src.OpenStream(s.ID)
		if i%2 == 0 && len(s.Data) > 0 {
			var b [10]byte
			if _, err := io.ReadFull(r, b[:min(len(b), len(s.Data))]); err != nil {
				t.Fatalf("stream %d: first bytes: %v", s.ID, err)
			}
		}
		if err := r.Close(); err != nil {
			t.Fatalf("stream %d: Close: %v", s.ID, err)
		}
		if n, err := r.Read(make([]byte, 1)); n > 0 || err == io.EOF {
			t.Errorf("stream %d: Read after Close: %d, %v; want an error", s.ID, n, err)
		}
	}
}

// Archive writes the archive RunBytes uses: every stream kind, several
// frames per stream (compressed ones and, for random bytes, stored ones),
// a stream without frames, written by concurrent goroutines as a dump's
// workers write, and small streams (an empty one among them) packed
// together in one Pack frame, as a dump worker packs a unit's.
func Archive(t testing.TB) ([]byte, []Stream) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 700)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	rows := func(seed, n int) []byte {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "%d\trow %d of %d\t%d\n", i, i, seed, rng.Int64())
		}
		return b.Bytes()
	}
	streams := []Stream{
		{ID: 1, Kind: archive.KindSchema, Data: random},
		{ID: 2, Kind: archive.KindData, Data: rows(2, 40), Rows: 40},
		{ID: 3, Kind: archive.KindData, Data: rows(3, 25), Rows: 25},
		{ID: 4, Kind: archive.KindData},
		{ID: 5, Kind: archive.KindLargeObject, Data: bytes.Repeat([]byte("a large object "), 60)},
		{ID: 6, Kind: archive.KindLargeObject, Data: []byte("a small large object")},
		{ID: 7, Kind: archive.KindData, Data: rows(7, 3), Rows: 3},
		{ID: 8, Kind: archive.KindLargeObject},
	}
	packed := streams[5:]
	m := &archive.Manifest{
		ToolVersion: "archivetest", Database: "db", Encoding: "UTF8",
		SnapshotTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		Tables:       []archive.Table{{Schema: "public", Name: "t", Columns: []string{"a", "b", "c"}}},
		SchemaStream: 1,
		Chunks:       []archive.Chunk{{Stream: 2, Table: 0}, {Stream: 3, Table: 0}, {Stream: 4, Table: 0}, {Stream: 7, Table: 0}},
		LargeObjects: []archive.LargeObject{{Stream: 5, OID: 16001, Size: 900}, {Stream: 6, OID: 16002, Size: 20}, {Stream: 8, OID: 16003}},
	}
	c, err := codec.New("zstd", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := archive.NewWriter(&out, m, c)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(streams)+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := w.Packer(0, 0)
		for i, s := range packed {
			bw := archive.NewBlockWriter(p.Stream(s.Kind, s.ID), 256)
			if _, err := bw.Write(s.Data); err != nil {
				errs[5+i] = err
				return
			}
			if errs[5+i] = bw.Close(); errs[5+i] != nil {
				return
			}
		}
		errs[len(streams)] = p.Close()
	}()
	for i, s := range streams[:5] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bw := archive.NewBlockWriter(w.Stream(s.Kind, s.ID), 256)
			for rest := s.Data; len(rest) > 0; {
				n := len(rest)
				if s.Kind == archive.KindData {
					n = bytes.IndexByte(rest, '\n') + 1 // one row per Write, as COPY does
				} else {
					n = min(n, 100)
				}
				if _, err := bw.Write(rest[:n]); err != nil {
					errs[i] = err
					return
				}
				rest = rest[n:]
			}
			errs[i] = bw.Close()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), streams
}

// The layout of docs/FORMAT.md, read independently of the archive
// package so that the suite checks it rather than trusts it.
const (
	headerSize      = 16
	frameHeaderSize = 32
	trailerSize     = 32
	footerMagic     = "PSFT"
)

// frame is where one frame lies.
type frame struct{ off, payload, end int }

// layout walks data: the end of header and manifest, every frame, the
// footer's start.
func layout(t *testing.T, data []byte) (dataStart int, frames []frame, footer int) {
	t.Helper()
	dataStart = headerSize + int(binary.LittleEndian.Uint32(data[12:])) + 4
	off := dataStart
	for string(data[off:off+4]) != footerMagic {
		stored := int(binary.LittleEndian.Uint32(data[off+20:]))
		frames = append(frames, frame{off: off, payload: off + frameHeaderSize, end: off + frameHeaderSize + stored})
		off += frameHeaderSize + stored
	}
	if len(frames) < 10 {
		t.Fatalf("test archive has %d frames, want several per stream", len(frames))
	}
	return dataStart, frames, off
}

// boundaries are the cuts at which an archive is incomplete: after the
// header and manifest, after every frame, inside the footer, inside the
// trailer, one byte short.
func boundaries(t *testing.T, data []byte) []int {
	start, frames, footer := layout(t, data)
	cuts := []int{headerSize, start}
	for _, f := range frames {
		cuts = append(cuts, f.payload, f.end)
	}
	return append(cuts, footer+4, len(data)-trailerSize, len(data)-trailerSize/2, len(data)-1)
}

// flip is a byte to damage and the region it lies in.
type flip struct {
	at     int
	region string
}

// flips are a byte in each region whose damage must be named as
// corruption: the header's manifest length, the manifest, the header and
// the payload of frames of every kind, the footer and the trailer's
// footer checksum.
func flips(t *testing.T, data []byte) []flip {
	start, frames, footer := layout(t, data)
	out := []flip{{12, "header"}, {(headerSize + start) / 2, "manifest"}}
	for i, f := range frames {
		if i%3 == 0 || i == len(frames)-1 {
			out = append(out, flip{f.off + 13, fmt.Sprintf("frame %d header", i)}, flip{(f.payload + f.end) / 2, fmt.Sprintf("frame %d payload", i)})
		}
	}
	return append(out, flip{footer + 5, "footer"}, flip{(footer + len(data) - trailerSize) / 2, "footer index"}, flip{len(data) - trailerSize + 16, "trailer"})
}
