package clone

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestLiveSource runs clone's live source and its same-database check
// against one real server.
func TestLiveSource(t *testing.T) {
	c := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, db := range []string{"src", "other"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, "src", `CREATE TABLE t (id int, note text);
		INSERT INTO t SELECT i, 'row ' || i FROM generate_series(1, 2000) i;
		CREATE TABLE gone (i int); INSERT INTO gone VALUES (1);
		SELECT lo_from_bytea(9001, 'live large object');`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(c.ConnString("src"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("same database", func(t *testing.T) { testSameDatabase(t, ctx, c, cfg) })
	t.Run("streams", func(t *testing.T) { testLiveStreams(t, ctx, c, cfg) })
	t.Run("finish", func(t *testing.T) { testLiveSourceFinish(t, ctx, c) })
}

// testSameDatabase checks that the probe tells the source's own database
// from another database of the same server, whatever the connection
// string looks like (socket or TCP), and that Run refuses a clone into
// its own source.
func testSameDatabase(t *testing.T, ctx context.Context, c *pgtest.Instance, src *pgx.ConnConfig) {
	tcp, err := pgx.ParseConfig(c.TCPConnString("src", pgtest.SuperuserName))
	if err != nil {
		t.Fatal(err)
	}
	tcp.Password = pgtest.SuperuserPassword
	for _, tc := range []struct {
		target string
		source *pgx.ConnConfig
		same   bool
	}{{"src", src, true}, {"src", tcp, true}, {"other", src, false}} {
		target, err := pgx.Connect(ctx, c.ConnString(tc.target))
		if err != nil {
			t.Fatal(err)
		}
		err = DistinctDatabases(ctx, tc.source, target)
		same := errors.Is(err, ErrSameDatabase)
		if same {
			err = nil
		}
		target.Close(ctx)
		if err != nil || same != tc.same {
			t.Errorf("source %s:%d, target %s: same %v, %v; want %v", tc.source.Host, tc.source.Port, tc.target, same, err, tc.same)
		}
	}
	// Run refuses before it reads or writes anything.
	if _, err := Run(ctx, Options{Session: dump.SessionOptions{Source: tcp}, Options: restore.Options{Target: src}}); !errors.Is(err, ErrSameDatabase) {
		t.Errorf("clone into its own source: %v, want ErrSameDatabase", err)
	}
}

// testLiveStreams checks the live source as the restore reads it: a
// chunk's stream is its table's rows as of the snapshot, with totals
// recorded before the reader sees EOF; a large object's stream is its
// bytes; a stream opens once; a table truncated after the snapshot fails
// its stream and becomes the source's failure; Finish refuses while a
// stream was neither read nor skipped.
func testLiveStreams(t *testing.T, ctx context.Context, c *pgtest.Instance, cfg *pgx.ConnConfig) {
	sess, err := dump.Begin(ctx, dump.SessionOptions{Source: cfg, Jobs: 2, BlockSize: pipeBlock})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	if err := c.Exec(ctx, "src", "INSERT INTO t VALUES (2001, 'late'); TRUNCATE gone"); err != nil {
		t.Fatal(err)
	}
	src := newLiveSource(ctx, sess)
	defer src.close()
	m := src.Manifest()
	streams := map[string]uint32{}
	for _, ch := range m.Chunks {
		streams[m.Tables[ch.Table].Name] = ch.Stream
	}
	if len(m.Chunks) != 2 || len(m.LargeObjects) != 1 {
		t.Fatalf("manifest: %d chunks, %d large objects", len(m.Chunks), len(m.LargeObjects))
	}

	id := streams["t"]
	if _, ok := src.Stream(id); ok {
		t.Error("a stream has totals before it was read")
	}
	st := src.OpenStream(id)
	b, err := io.ReadAll(st)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	info, ok := src.Stream(id)
	if rows := bytes.Count(b, []byte("\n")); !ok || info.Rows != 2000 || rows != 2000 || info.RawBytes != int64(len(b)) || info.Kind != archive.KindData {
		t.Errorf("table t: read %d rows, %d bytes; totals %+v (recorded %v); want 2000 rows as of the snapshot", rows, len(b), info, ok)
	}
	if !bytes.HasPrefix(b, []byte("1\trow 1\n")) || bytes.Contains(b, []byte("late")) {
		t.Errorf("table t's stream starts %.20q or holds the later row", b)
	}
	if _, err := io.ReadAll(src.OpenStream(id)); err == nil || !strings.Contains(err.Error(), "opened twice") {
		t.Errorf("second open: %v", err)
	}
	if _, err := io.ReadAll(src.OpenStream(9999)); err == nil || !strings.Contains(err.Error(), "no stream 9999") {
		t.Errorf("unknown stream: %v", err)
	}
	lo, err := io.ReadAll(src.OpenStream(m.LargeObjects[0].Stream))
	if err != nil || string(lo) != "live large object" {
		t.Errorf("large object: %q, %v", lo, err)
	}
	var schema bytes.Buffer
	if _, err := io.Copy(&schema, src.OpenStream(m.SchemaStream)); err != nil || !bytes.HasPrefix(schema.Bytes(), []byte("PGDMP")) {
		t.Errorf("schema stream: %d bytes starting %.5q, %v; want pg_dump's custom format", schema.Len(), schema.Bytes(), err)
	}

	// The truncated table: its reader refuses it, and the source says so.
	_, err = io.ReadAll(src.OpenStream(streams["gone"]))
	var changed *dump.ChangedError
	if !errors.As(err, &changed) || !errors.As(src.failure(), &changed) {
		t.Errorf("truncated table: stream error %v, source failure %v; want a ChangedError", err, src.failure())
	}
	if err := src.Finish(); !errors.As(err, &changed) {
		t.Errorf("Finish after a failed stream: %v", err)
	}
}

// testLiveSourceFinish checks that Finish fails while a stream was neither
// read nor skipped (a clone that would otherwise end without all its
// rows), succeeds once it is skipped, and ends the snapshot.
func testLiveSourceFinish(t *testing.T, ctx context.Context, c *pgtest.Instance) {
	if err := c.CreateDB(ctx, "fin"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "fin", "CREATE TABLE a (i int); CREATE TABLE b (i int); INSERT INTO a VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(c.ConnString("fin"))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := dump.Begin(ctx, dump.SessionOptions{Source: cfg, Jobs: 1, BlockSize: pipeBlock})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	src := newLiveSource(ctx, sess)
	defer src.close()
	m := src.Manifest()
	if len(m.Chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(m.Chunks))
	}
	if _, err := io.ReadAll(src.OpenStream(m.Chunks[0].Stream)); err != nil {
		t.Fatal(err)
	}
	if err := src.Finish(); err == nil || !strings.Contains(err.Error(), "was never read completely") {
		t.Fatalf("Finish with an unread stream: %v", err)
	}
	src.Skip(m.Chunks[1].Stream)
	if err := src.Finish(); err != nil {
		t.Fatalf("Finish with the unread stream skipped: %v", err)
	}
	// The snapshot has ended: it can no longer be imported.
	r, err := sess.OpenReader(ctx)
	if err == nil {
		r.Close(ctx)
		t.Error("the snapshot can still be imported after Finish")
	}
}
