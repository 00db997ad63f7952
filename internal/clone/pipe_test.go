package clone

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestBlockPipe checks that a stream crosses the pipe unchanged whatever
// the sizes of the writes, in reads of at most one block, and ends with
// io.EOF, or with the writer's error after the blocks handed over before
// it.
func TestBlockPipe(t *testing.T) {
	row := []byte("12345\tsome text\n")
	for _, tc := range []struct {
		name   string
		writes []int // sizes of the writes, cut from a repeating pattern
		err    error // the writer's final error
	}{
		{"empty", nil, nil},
		{"rows", repeat(len(row), 100000), nil},
		{"exactly one block", []int{pipeBlock}, nil},
		{"one byte over", []int{pipeBlock, 1}, nil},
		{"one huge write", []int{5*pipeBlock + 17}, nil},
		{"failure after data", repeat(len(row), 50000), errors.New("source COPY failed")},
		{"failure at once", nil, errors.New("connect failed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src bytes.Buffer
			total := 0
			for _, n := range tc.writes {
				total += n
			}
			for src.Len() < total {
				src.Write(row[:min(len(row), total-src.Len())])
			}
			p := newBlockPipe(context.Background())
			go func() {
				b := src.Bytes()
				for _, n := range tc.writes {
					if _, err := p.Write(b[:n]); err != nil {
						p.closeWrite(err)
						return
					}
					b = b[n:]
				}
				p.closeWrite(tc.err)
			}()
			var got bytes.Buffer
			buf := make([]byte, 2*pipeBlock)
			var err error
			for {
				var n int
				n, err = p.Read(buf)
				if n > pipeBlock {
					t.Fatalf("a read returned %d bytes, more than a block", n)
				}
				got.Write(buf[:n])
				if err != nil {
					break
				}
			}
			want := tc.err
			if want == nil {
				want = io.EOF
			}
			if err != want {
				t.Errorf("reader ended with %v, want %v", err, want)
			}
			switch {
			case tc.err == nil && !bytes.Equal(got.Bytes(), src.Bytes()):
				t.Errorf("read %d bytes, wrote %d (or they differ)", got.Len(), src.Len())
			case tc.err != nil && (!bytes.HasPrefix(src.Bytes(), got.Bytes()) || got.Len()%pipeBlock != 0):
				// A failed stream delivers the blocks handed over before
				// the failure, not the partial one: the error follows.
				t.Errorf("read %d bytes of %d before the error: want whole blocks of what was written", got.Len(), src.Len())
			}
		})
	}
}

func repeat(n, times int) []int {
	s := make([]int, times)
	for i := range s {
		s[i] = n
	}
	return s
}

// TestBlockPipeStops checks that a writer does not block forever: once
// the reader closes, or the context ends, its next hand-over of a block
// fails, with at most pipeDepth blocks queued before.
func TestBlockPipeStops(t *testing.T) {
	block := make([]byte, pipeBlock)
	for _, tc := range []struct {
		name string
		stop func(p *blockPipe, cancel context.CancelFunc)
		want error
	}{
		{"reader closes", func(p *blockPipe, _ context.CancelFunc) { p.Close() }, errReaderClosed},
		{"context ends", func(_ *blockPipe, cancel context.CancelFunc) { cancel() }, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := newBlockPipe(ctx)
			for i := 0; i < pipeDepth; i++ {
				if _, err := p.Write(block); err != nil {
					t.Fatalf("block %d of a queue of %d: %v", i, pipeDepth, err)
				}
			}
			done := make(chan error, 1)
			go func() {
				_, err := p.Write(block) // the queue is full: waits
				done <- err
			}()
			select {
			case err := <-done:
				t.Fatalf("a write past the queue returned %v without waiting", err)
			case <-time.After(50 * time.Millisecond):
			}
			tc.stop(p, cancel)
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) {
					t.Errorf("write ended with %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the writer is still blocked")
			}
		})
	}
}

// TestExplainSnapshot checks the advice for a held snapshot that is gone:
// different for a resumed clone and a new one, and no change to any other
// error or to a clone in a snapshot of its own.
func TestExplainSnapshot(t *testing.T) {
	gone := errors.Join(errors.New("import snapshot"), pg.ErrSnapshotNotFound)
	other := errors.New("connection refused")
	for _, tc := range []struct {
		name string
		err  error
		opts Options
		want string // prefix; "" for err unchanged
	}{
		{"own snapshot", gone, Options{}, ""},
		{"other error", other, Options{Session: dump.SessionOptions{Snapshot: "s1"}}, ""},
		{"held snapshot gone", gone, Options{Session: dump.SessionOptions{Snapshot: "s1"}}, "snapshot s1 does not exist: the `pgsprint snapshot` process that printed it has ended"},
		{"resumed, snapshot gone", gone, Options{Session: dump.SessionOptions{Snapshot: "s1"}, Options: restore.Options{Resume: true}}, "snapshot s1 no longer exists: the `pgsprint snapshot` process holding it has ended; start over without --resume"},
	} {
		got := explainSnapshot(tc.err, tc.opts)
		switch {
		case tc.want == "" && got != tc.err:
			t.Errorf("%s: %v, want the error unchanged", tc.name, got)
		case tc.want != "" && !strings.HasPrefix(got.Error(), tc.want):
			t.Errorf("%s: %v\nwant %s...", tc.name, got, tc.want)
		}
	}
}

// TestRunResumeNeedsSnapshot checks that --resume without --snapshot is
// refused before any connection is made (none is configured here).
func TestRunResumeNeedsSnapshot(t *testing.T) {
	_, err := Run(context.Background(), Options{Options: restore.Options{Resume: true}})
	if err == nil || !strings.Contains(err.Error(), "resuming needs the snapshot") {
		t.Errorf("Run with Resume and no Snapshot: %v", err)
	}
}
