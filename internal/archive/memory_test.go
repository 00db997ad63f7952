package archive

import (
	"bytes"
	"runtime"
	"testing"
)

// TestReaderIndexMemory bounds the live heap an open Reader's index holds
// per stream, for an archive of many one-frame streams (small tables),
// which a restore keeps for its whole run: 167 bytes a stream with the
// footer's entries as decoded, a map of stream ids and a slice of frame
// indexes per stream; 72 as index.go keeps it.
func TestReaderIndexMemory(t *testing.T) {
	const n = 100_000
	w, out := newTestWriter(t, &Manifest{ToolVersion: "test", Database: "db", Encoding: "UTF8"})
	row := []byte("1\t1\tc4ca4238a0b923820dcc509a6f75849b\t2024-01-01 01:00:00+00\n")
	for i := range n {
		s := w.Stream(KindData, uint32(i+2))
		if err := s.WriteBlock(row, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := out.Bytes()
	before := liveHeap()
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	per := (liveHeap() - before) / n
	runtime.KeepAlive(ar)
	runtime.KeepAlive(data)
	t.Logf("%d bytes per stream", per)
	if per > 90 {
		t.Errorf("an open Reader holds %d bytes per stream, want at most 90", per)
	}
}

// newTestWriter starts an uncompressed archive of m in memory.
func newTestWriter(t testing.TB, m *Manifest) (*Writer, *bytes.Buffer) {
	t.Helper()
	out := &bytes.Buffer{}
	w, err := NewWriter(out, m, mustCodec(t, "none", 0))
	if err != nil {
		t.Fatal(err)
	}
	return w, out
}

// liveHeap is the bytes of live heap objects. It collects twice: what
// sync.Pools hold (encoding/json's encoder buffer, as large as the last
// manifest it wrote) survives one collection in their victim caches.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
