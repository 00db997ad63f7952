package archive

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
)

// demuxAll opens the streams in order on `readers` goroutines, each taking
// the next stream when done with the previous, as restore workers do, and
// returns what each stream read and its error.
func demuxAll(t *testing.T, d *Demux, ids []uint32, readers int) (map[uint32][]byte, map[uint32]error) {
	t.Helper()
	got, errs := map[uint32][]byte{}, map[uint32]error{}
	var mu sync.Mutex
	work := make(chan uint32)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				rc := d.OpenStream(id)
				b, err := io.ReadAll(rc)
				rc.Close()
				mu.Lock()
				got[id], errs[id] = b, err
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	return got, errs
}

func TestDemux(t *testing.T) {
	streams := standardStreams(20)
	data := writeArchive(t, mustCodec(t, "zstd", 0), streams, 2048)
	var ids, reversed []uint32
	for _, s := range streams {
		ids = append(ids, s.id)
		reversed = append([]uint32{s.id}, reversed...)
	}
	for _, tc := range []struct {
		name    string
		order   []uint32
		readers int
	}{
		{"one reader per stream", ids, len(ids)},
		{"one reader, reverse order (spills)", reversed, 1},
		{"two readers", reversed, 2},
		{"half the streams skipped", ids[:len(ids)/2], 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spill := t.TempDir()
			pr, pw := io.Pipe()
			go func() { // a slow, chunky pipe like ssh
				for p := data; len(p) > 0; {
					n := min(len(p), 777)
					pw.Write(p[:n])
					p = p[n:]
				}
				pw.Close()
			}()
			d, err := NewDemux(pr, spill)
			if err != nil {
				t.Fatal(err)
			}
			wanted := map[uint32]bool{}
			for _, id := range tc.order {
				wanted[id] = true
			}
			for _, id := range ids {
				if !wanted[id] {
					d.Skip(id)
				}
			}
			got, errs := demuxAll(t, d, tc.order, tc.readers)
			if err := d.Finish(); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			for _, s := range streams {
				if !wanted[s.id] {
					if _, read := got[s.id]; read {
						t.Errorf("skipped stream %d was read", s.id)
					}
					continue
				}
				if errs[s.id] != nil || !bytes.Equal(got[s.id], s.data) {
					t.Errorf("stream %d: %d bytes, err %v; want %d bytes", s.id, len(got[s.id]), errs[s.id], len(s.data))
				}
				info, ok := d.Stream(s.id)
				if !ok || info.RawBytes != int64(len(s.data)) || info.Rows != s.rows {
					t.Errorf("stream %d totals %+v", s.id, info)
				}
			}
			if left, _ := os.ReadDir(spill); len(left) != 0 {
				t.Errorf("%d spill files left behind", len(left))
			}
		})
	}
}

// TestDemuxIncomplete: a truncated archive never reads as complete: every
// stream cut short, and Wait, report an incomplete archive.
func TestDemuxIncomplete(t *testing.T) {
	streams := standardStreams(20)
	data := writeArchive(t, mustCodec(t, "none", 0), streams, 2048)
	for _, cut := range []int{len(data) / 3, len(data) * 2 / 3, len(data) - 1} {
		d, err := NewDemux(bytes.NewReader(data[:cut]), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var ids []uint32
		for _, s := range streams {
			ids = append(ids, s.id)
		}
		got, errs := demuxAll(t, d, ids, 3)
		if err := d.Finish(); !errors.Is(err, ErrIncomplete) {
			t.Errorf("cut at %d: Wait = %v, want incomplete", cut, err)
		}
		for _, s := range streams {
			if errs[s.id] == nil && !bytes.Equal(got[s.id], s.data) {
				t.Errorf("cut at %d: stream %d read %d of %d bytes without an error", cut, s.id, len(got[s.id]), len(s.data))
			}
		}
	}
}

func TestDemuxUnknownStream(t *testing.T) {
	data := writeArchive(t, mustCodec(t, "none", 0), standardStreams(1), 2048)
	d, err := NewDemux(bytes.NewReader(data), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(d.OpenStream(9999)); err == nil {
		t.Error("reading a stream the archive does not have succeeded")
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
}
