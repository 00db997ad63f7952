package archive

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// failAfter fails every write once n bytes have been written.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.n {
		return 0, errors.New("disk full")
	}
	return f.buf.Write(p)
}

func TestWriterMisuse(t *testing.T) {
	tests := []struct {
		name string
		run  func(w *Writer) error
		want string
	}{
		{
			name: "stream not closed",
			run: func(w *Writer) error {
				w.Stream(KindData, 1)
				w.Stream(KindData, 2).Close()
				return w.Close()
			},
			want: "archive: 1 stream(s) opened but not closed (first: stream 1)",
		},
		{
			name: "stream opened twice",
			run: func(w *Writer) error {
				w.Stream(KindData, 1).Close()
				w.Stream(KindData, 1).Close()
				return w.Close()
			},
			want: "archive: stream 1 opened twice",
		},
		{
			name: "end is not a stream kind",
			run: func(w *Writer) error {
				return w.Stream(KindEnd, 1).WriteBlock([]byte("x\n"), 1)
			},
			want: "end is not a stream kind",
		},
		{
			name: "write after stream close",
			run: func(w *Writer) error {
				s := w.Stream(KindData, 1)
				s.Close()
				return s.WriteBlock([]byte("x\n"), 1)
			},
			want: "archive: stream 1: write after close",
		},
		{
			name: "write after writer close",
			run: func(w *Writer) error {
				s := w.Stream(KindData, 1)
				s.Close()
				w.Close()
				return w.Stream(KindData, 2).WriteBlock([]byte("x\n"), 1)
			},
			want: "archive: writer is closed",
		},
		{
			name: "oversized block",
			run: func(w *Writer) error {
				return w.Stream(KindLargeObject, 1).WriteBlock(make([]byte, MaxBlockSize+1), 0)
			},
			want: "exceeds the 67108864 byte limit",
		},
		{
			name: "rows without bytes",
			run: func(w *Writer) error {
				return w.Stream(KindData, 1).WriteBlock(nil, 3)
			},
			want: "3 rows in an empty block",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w, err := NewWriter(&out, &Manifest{}, mustCodec(t, "zstd", 0))
			if err != nil {
				t.Fatal(err)
			}
			err = tt.run(w)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want containing %q", err, tt.want)
			}
		})
	}
}

// TestWriterStickyError checks that after a failed write every later call
// fails the same way and no trailer is written.
func TestWriterStickyError(t *testing.T) {
	out := &failAfter{n: 2000}
	w, err := NewWriter(out, &Manifest{}, mustCodec(t, "none", 0))
	if err != nil {
		t.Fatal(err)
	}
	s1 := w.Stream(KindData, 1)
	s2 := w.Stream(KindData, 2)
	row := bytes.Repeat([]byte("x"), 499)
	row = append(row, '\n')
	var first error
	for i := 0; i < 10 && first == nil; i++ {
		first = s1.WriteBlock(row, 1)
	}
	if first == nil || !strings.Contains(first.Error(), "disk full") {
		t.Fatalf("first error = %v", first)
	}
	for name, err := range map[string]error{
		"other stream":  s2.WriteBlock(row, 1),
		"stream close":  s1.Close(),
		"new stream":    w.Stream(KindData, 3).WriteBlock(row, 1),
		"writer close":  w.Close(),
		"writer close2": w.Close(),
	} {
		if err != first && err.Error() != first.Error() {
			t.Errorf("%s: error %v, want %v", name, err, first)
		}
	}
	if bytes.Contains(out.buf.Bytes(), []byte(trailerMagic)) {
		t.Error("trailer written after a failure")
	}
}

func TestWriterBytes(t *testing.T) {
	var out bytes.Buffer
	w, err := NewWriter(&out, &Manifest{}, mustCodec(t, "zstd", 0))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Stream(KindData, 1)
	block := bytes.Repeat([]byte("row\n"), 1000)
	if err := s.WriteBlock(block, 1000); err != nil {
		t.Fatal(err)
	}
	raw, stored := w.Bytes()
	if raw != int64(len(block)) || stored != int64(out.Len()) {
		t.Errorf("Bytes() = %d, %d; want %d, %d", raw, stored, len(block), out.Len())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second stream Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second writer Close: %v", err)
	}
	if _, stored := w.Bytes(); stored != int64(out.Len()) {
		t.Errorf("stored %d after close, file is %d", stored, out.Len())
	}
}

func TestBlockWriter(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		writes    []string
		wantRaw   []int // raw length of each data frame
		wantRows  int64
		kind      Kind
		wantBytes string
	}{
		{name: "no writes", size: 10, kind: KindData},
		{name: "one small block", size: 100, writes: []string{"a\n", "b\n"}, wantRaw: []int{4}, wantRows: 2, kind: KindData},
		{name: "cut when reaching size", size: 4, writes: []string{"a\n", "b\n", "c\n", "dd\n", "e\n"}, wantRaw: []int{4, 5, 2}, wantRows: 5, kind: KindData},
		{name: "multi-row write", size: 3, writes: []string{"a\nb\nc\n", "d\n"}, wantRaw: []int{6, 2}, wantRows: 4, kind: KindData},
		{name: "large object counts no rows", size: 4, writes: []string{"\n\n\n\n\n"}, wantRaw: []int{5}, wantRows: 0, kind: KindLargeObject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w, err := NewWriter(&out, &Manifest{}, mustCodec(t, "none", 0))
			if err != nil {
				t.Fatal(err)
			}
			bw := NewBlockWriter(w.Stream(tt.kind, 7), tt.size)
			var want []byte
			for _, s := range tt.writes {
				n, err := bw.Write([]byte(s))
				if err != nil || n != len(s) {
					t.Fatalf("Write = %d, %v", n, err)
				}
				want = append(want, s...)
			}
			if err := bw.Close(); err != nil {
				t.Fatal(err)
			}
			if err := bw.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := bw.Write([]byte("x\n")); err == nil {
				t.Error("Write after Close succeeded")
			}
			if bw.Rows() != tt.wantRows {
				t.Errorf("Rows() = %d, want %d", bw.Rows(), tt.wantRows)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			ar, err := Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatal(err)
			}
			var raws []int
			for _, e := range ar.streamFrames(0) {
				if e.kind != KindEnd {
					raws = append(raws, int(e.raw))
				}
			}
			if !equalInts(raws, tt.wantRaw) {
				t.Errorf("frame sizes %v, want %v", raws, tt.wantRaw)
			}
			info, _ := ar.Stream(7)
			if info.Rows != tt.wantRows {
				t.Errorf("stream rows %d, want %d", info.Rows, tt.wantRows)
			}
			got, err := io.ReadAll(ar.OpenStream(7))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("read %q, %v; want %q", got, err, want)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// countingWriter keeps only the size, for archives too big to hold.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// TestBlockWriterHugeRow checks that a row larger than a frame is split
// instead of making the buffer grow past MaxBlockSize.
func TestBlockWriterHugeRow(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 130 MiB")
	}
	var out countingWriter
	w, err := NewWriter(&out, &Manifest{}, mustCodec(t, "none", 0))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Stream(KindData, 1)
	bw := NewBlockWriter(s, 1<<20)
	if _, err := bw.Write([]byte("small\n")); err != nil {
		t.Fatal(err)
	}
	huge := make([]byte, MaxBlockSize+MaxBlockSize/2)
	huge[len(huge)-1] = '\n'
	if _, err := bw.Write(huge); err != nil {
		t.Fatal(err)
	}
	if cap(bw.buf) > 1<<20 {
		t.Errorf("buffer grew to %d", cap(bw.buf))
	}
	if err := bw.Close(); err != nil {
		t.Fatal(err)
	}
	if s.seq != 3 || bw.Rows() != 2 || s.rows != 2 {
		t.Errorf("frames %d rows %d/%d, want 3 frames and 2 rows", s.seq, bw.Rows(), s.rows)
	}
}
