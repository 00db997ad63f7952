package archive_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/file"
	"github.com/pgsprint/pgsprint/internal/store/stdio"
)

// opener opens archive bytes put on a medium by place, with access.
func opener(place func(t *testing.T, data []byte) store.Backend, access archive.Access) archivetest.Opener {
	return func(ctx context.Context, t *testing.T, data []byte) (archive.Source, func(), error) {
		ar, err := archive.OpenLocation(ctx, place(t, data), archive.OpenOptions{Access: access, SpillDir: t.TempDir()})
		if err != nil {
			return nil, nil, err
		}
		return ar.Source, func() { ar.Close() }, nil
	}
}

func onFile(t *testing.T, data []byte) store.Backend {
	path := filepath.Join(t.TempDir(), "a.pgs")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return file.New(path)
}

func onPipe(_ *testing.T, data []byte) store.Backend {
	return stdio.New(bytes.NewReader(data), nil)
}

// TestSourceConformance runs the archive.Source suite for the Reader on
// a file, the Demux on standard input, and the Reader over standard input
// spooled to disk (restore --to-sql -f -).
func TestSourceConformance(t *testing.T) {
	t.Run("Reader on a file", func(t *testing.T) { archivetest.RunBytes(t, opener(onFile, archive.Parallel)) })
	t.Run("Demux on a pipe", func(t *testing.T) { archivetest.RunBytes(t, opener(onPipe, archive.Parallel)) })
	t.Run("Reader on a spooled pipe", func(t *testing.T) { archivetest.RunBytes(t, opener(onPipe, archive.Ordered)) })
}

// TestOrder checks what each way of opening says of its streams' order:
// a file or a spooled pipe is indexed, a pipe read as it arrives
// interleaved, and a database's view of either says what the archive
// says, since restore schedules its reads and judges a missing stream by
// it.
func TestOrder(t *testing.T) {
	data, _ := archivetest.Archive(t)
	for _, tc := range []struct {
		name   string
		place  func(t *testing.T, data []byte) store.Backend
		access archive.Access
		want   archive.Order
	}{
		{"file", onFile, archive.Parallel, archive.Indexed},
		{"pipe", onPipe, archive.Parallel, archive.Interleaved},
		{"spooled pipe", onPipe, archive.Ordered, archive.Indexed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, done, err := opener(tc.place, tc.access)(context.Background(), t, data)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			if got := src.Order(); got != tc.want {
				t.Errorf("Order() = %v, want %v", got, tc.want)
			}
			if got := (&archive.DatabaseSource{Source: src}).Order(); got != tc.want {
				t.Errorf("a database's view: Order() = %v, want %v", got, tc.want)
			}
		})
	}
}
