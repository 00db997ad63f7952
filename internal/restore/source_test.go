package restore

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
)

// TestMissingStream: a seekable archive whose manifest names a table
// stream its footer lacks is refused while the data stage is planned,
// before any load, also behind the progress counter and a server
// archive's database view; a pipe (not indexed) would only learn it at
// its end, so it is not refused up front.
func TestMissingStream(t *testing.T) {
	m := &archive.Manifest{
		ToolVersion: "test",
		Database:    "db",
		Encoding:    "UTF8",
		DataOnly:    true,
		Tables:      []archive.Table{{Schema: "public", Name: "t", Columns: []string{"i"}}, {Schema: "public", Name: "gone", Columns: []string{"i"}}},
		Chunks:      []archive.Chunk{{Stream: 1, Table: 0}, {Stream: 2, Table: 1}},
	}
	w, out := archivetest.NewWriter(t, m)
	s := w.Stream(archive.KindData, 1) // stream 2 is never written
	if err := s.WriteBlock([]byte("1\n"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ar, err := archive.Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		indexed bool
		wantErr string
	}{
		{"seekable archive", true, `archive has no data for table "public"."gone"`},
		{"source read front to back", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &openedSource{Source: ar, indexed: tc.indexed}
			d := newDataStage(Options{}, newCountingSource(ar, nil), src, &selection{m: m}, statistics{}, &target{}, nil, slog.New(slog.DiscardHandler), nil)
			_, err := d.buildGraph(context.Background(), &postData{sel: &selection{dataOnly: true}}, nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("buildGraph: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("buildGraph: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	for _, src := range []archive.Source{ar, &archive.DatabaseSource{Source: ar}, newCountingSource(ar, nil)} {
		if !openSource(src, "").indexed {
			t.Errorf("%T must count as indexed", src)
		}
	}
}
