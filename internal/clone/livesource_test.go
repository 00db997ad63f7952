package clone

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestLiveSourceConformance runs the archive.Source suite for clone's
// live source: each stream is a COPY or a large object read from the
// source database in the session's snapshot.
func TestLiveSourceConformance(t *testing.T) {
	c := pgtest.New(t)
	ctx := t.Context()
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	lo := bytes.Repeat([]byte("a large object\x00"), 5000)
	if err := c.Exec(ctx, "src", fmt.Sprintf(`CREATE TABLE t (a int, b text);
		INSERT INTO t SELECT i, 'row ' || i FROM generate_series(1, 300) i;
		SELECT lo_from_bytea(0, '\x%x'::bytea);`, lo)); err != nil {
		t.Fatal(err)
	}
	var rows bytes.Buffer
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&rows, "%d\trow %d\n", i, i)
	}
	cfg, err := pgx.ParseConfig(c.ConnString("src"))
	if err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T) (*liveSource, *archive.Manifest) {
		sess, err := dump.Begin(ctx, dump.SessionOptions{Source: cfg, Jobs: 2, BlockSize: pipeBlock, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		src := newLiveSource(ctx, sess)
		t.Cleanup(func() {
			src.close()
			sess.Close(ctx)
		})
		return src, sess.Manifest
	}
	_, m := open(t)
	if len(m.Chunks) != 1 || len(m.LargeObjects) != 1 {
		t.Fatalf("manifest has %d chunks and %d large objects, want 1 and 1", len(m.Chunks), len(m.LargeObjects))
	}
	want := []archivetest.Stream{
		{ID: m.Chunks[0].Stream, Kind: archive.KindData, Data: rows.Bytes(), Rows: 300},
		{ID: m.LargeObjects[0].Stream, Kind: archive.KindLargeObject, Data: lo},
	}
	archivetest.RunLive(t, func(t *testing.T) archive.Source {
		src, _ := open(t)
		return src
	}, want)
}
