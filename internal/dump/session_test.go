package dump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// TestSession runs a Session, its readers and its workers against one
// real server, below dump.Run.
func TestSession(t *testing.T) {
	c := pgtest.New(t)
	t.Run("workers", func(t *testing.T) { testSessionAndWorkers(t, c) })
	t.Run("reader lock", func(t *testing.T) { testReaderLock(t, c) })
	t.Run("reader by id", func(t *testing.T) { testReaderByID(t, c) })
	t.Run("catalog queries", func(t *testing.T) { testCatalogQueries(t, c) })
}

// testSessionAndWorkers runs a Session and its workers against a real
// server, below dump.Run: the manifest plans a split table in several
// chunks; rows committed after the snapshot are not read; every data
// stream holds exactly its table's rows, cut into blocks of whole rows
// once they reach the block size; the rows each stream
// records, the rows the workers count and the rows progress heard of
// agree; large objects come in their own streams.
func testSessionAndWorkers(t *testing.T, c *pgtest.Instance) {
	const db = "workers"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, `
		CREATE TABLE big (id int PRIMARY KEY, note text);
		INSERT INTO big SELECT i, repeat(md5(i::text), 3) FROM generate_series(1, 3000) i;
		CREATE TABLE "Odd ""t""" (v text);
		INSERT INTO "Odd ""t""" VALUES ('tab	and newline
		inside'), (repeat('x', 10000)), (NULL);
		SELECT lo_from_bytea(7001, 'large object bytes');
		ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	const blockSize = 4096
	sess, err := Begin(ctx, SessionOptions{Source: cfg, Jobs: 2, BlockSize: blockSize, Version: "test",
		Split: chunk.Options{ChunkSize: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(ctx)
	m := sess.Manifest
	if m.Snapshot == "" || len(m.Tables) != 2 || len(m.LargeObjects) != 1 || m.LargeObjects[0].OID != 7001 {
		t.Fatalf("manifest: snapshot %q, %d tables, large objects %+v", m.Snapshot, len(m.Tables), m.LargeObjects)
	}
	perTable := map[string]int{}
	for _, ch := range m.Chunks {
		perTable[m.Tables[ch.Table].Name]++
	}
	if perTable["big"] < 2 || perTable[`Odd "t"`] != 1 {
		t.Fatalf("chunks per table %v: want big split (64 KiB chunks) and the small table whole", perTable)
	}

	// Committed after the snapshot: invisible to the dump.
	if err := c.Exec(ctx, db, `INSERT INTO big VALUES (3001, 'late'); INSERT INTO "Odd ""t""" VALUES ('late')`); err != nil {
		t.Fatal(err)
	}

	w, out := archivetest.NewWriter(t, m)
	rec := &addCounter{}
	opts := Options{Jobs: 2, BlockSize: blockSize, Progress: rec}
	rows, err := runPool(ctx, opts.WithDefaults(), w, Sessions{List: []*Session{sess}, Units: sess.Units()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sess.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rows != 3003 || rec.rows != 3003 {
		t.Errorf("workers counted %d rows, progress heard %d; want 3003 (as of the snapshot)", rows, rec.rows)
	}

	// Every frame of a data stream is whole rows.
	seq, err := archive.NewSequential(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	data := map[uint32]*bytes.Buffer{}
	for {
		f, err := seq.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind != archive.KindData || f.End {
			continue
		}
		// All rows but the last fit in a block: the block is cut once
		// the row that fills it has been added.
		beforeLast := bytes.LastIndexByte(f.Data[:max(len(f.Data)-1, 0)], '\n') + 1
		if !bytes.HasSuffix(f.Data, []byte("\n")) || beforeLast >= blockSize {
			t.Errorf("stream %d frame %d: %d bytes, %d before its last row, ends in a newline: %v", f.Stream, f.Seq, len(f.Data), beforeLast, bytes.HasSuffix(f.Data, []byte("\n")))
		}
		if data[f.Stream] == nil {
			data[f.Stream] = &bytes.Buffer{}
		}
		data[f.Stream].Write(f.Data)
	}

	r, err := archive.Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, tc := range []struct {
		table, where string
		rows         int64
	}{{"big", "id <= 3000", 3000}, {`Odd "t"`, "v IS DISTINCT FROM 'late'", 3}} {
		var got bytes.Buffer
		var recorded int64
		for _, ch := range m.Chunks {
			if m.Tables[ch.Table].Name != tc.table {
				continue
			}
			got.Write(data[ch.Stream].Bytes())
			info, ok := r.Stream(ch.Stream)
			if !ok || info.Rows != int64(bytes.Count(data[ch.Stream].Bytes(), []byte("\n"))) || info.Frames < 1 {
				t.Errorf("stream %d: info %+v against %d rows read", ch.Stream, info, bytes.Count(data[ch.Stream].Bytes(), []byte("\n")))
			}
			if info != nil {
				recorded += info.Rows
			}
		}
		var want bytes.Buffer
		q := fmt.Sprintf("COPY (SELECT * FROM %s WHERE %s) TO STDOUT", pg.Ident(tc.table), tc.where)
		if _, err := conn.PgConn().CopyTo(ctx, &want, q); err != nil {
			t.Fatal(err)
		}
		if recorded != tc.rows || !sameLines(got.String(), want.String()) {
			t.Errorf("table %s: %d rows recorded, want %d; content equal to the snapshot's: %v", tc.table, recorded, tc.rows, sameLines(got.String(), want.String()))
		}
	}
	lo := m.LargeObjects[0]
	b, err := io.ReadAll(r.OpenStream(lo.Stream))
	if err != nil || string(b) != "large object bytes" {
		t.Errorf("large object stream: %q, %v", b, err)
	}
}

// sameLines compares COPY text regardless of row order (chunks are read in
// parallel, a table's rows in no promised order).
func sameLines(a, b string) bool {
	count := map[string]int{}
	for _, l := range strings.SplitAfter(a, "\n") {
		count[l]++
	}
	for _, l := range strings.SplitAfter(b, "\n") {
		count[l]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// addCounter is a Reporter that sums what Add reports.
type addCounter struct {
	progress.Nop
	mu          sync.Mutex
	bytes, rows int64
}

func (a *addCounter) Add(b, r int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bytes += b
	a.rows += r
}

// testReaderLock checks a reader's check before each COPY against a real
// server: a table truncated, renamed away and replaced, or dropped after
// the snapshot is refused with a ChangedError saying what happened; a
// table another session holds in ACCESS EXCLUSIVE mode fails at once
// with a LockConflictError naming that session; an untouched table locks.
func testReaderLock(t *testing.T, c *pgtest.Instance) {
	const db = "locks"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sess := beginIn(ctx, t, c, db, `CREATE TABLE kept (i int); CREATE TABLE truncated (i int); CREATE TABLE replaced (i int);
		CREATE TABLE dropped (i int); CREATE TABLE busy (i int); INSERT INTO truncated VALUES (1)`)
	if err := c.Exec(ctx, db, `TRUNCATE truncated; ALTER TABLE replaced RENAME TO old; CREATE TABLE replaced (i int); DROP TABLE dropped`); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "LOCK TABLE busy IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	tables := map[string]archive.Table{}
	for _, tab := range sess.Manifest.Tables {
		tables[tab.Name] = tab
	}
	r, err := sess.OpenReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	for _, tc := range []struct {
		table   string
		changed string // ChangedError.What
		busy    bool
	}{
		{table: "kept"},
		{table: "truncated", changed: "truncated or rewritten"},
		{table: "kept"},
		{table: "replaced", changed: "renamed (another table has its name now)"},
		{table: "dropped", changed: "dropped or renamed"},
		{table: "busy", busy: true},
	} {
		tab, ok := tables[tc.table]
		if !ok {
			t.Fatalf("table %s not in the manifest", tc.table)
		}
		if r.IsClosed() || r.conn.PgConn().TxStatus() == 'E' {
			// A failed check leaves the transaction aborted: a fresh
			// reader for the next case, as a new run would have.
			r.Close(ctx)
			if r, err = sess.OpenReader(ctx); err != nil {
				t.Fatal(err)
			}
		}
		err := r.Lock(ctx, tab)
		var changed *ChangedError
		var conflict *pg.LockConflictError
		switch {
		case tc.changed != "":
			if !errors.As(err, &changed) || changed.What != tc.changed {
				t.Errorf("%s: %v, want a ChangedError %q", tc.table, err, tc.changed)
			}
		case tc.busy:
			if !errors.As(err, &conflict) || conflict.Blocker == nil || conflict.Blocker.PID != int(other.PgConn().PID()) {
				t.Errorf("%s: %v, want a LockConflictError naming pid %d", tc.table, err, other.PgConn().PID())
			}
		case err != nil:
			t.Errorf("%s: %v", tc.table, err)
		}
	}
}

// beginIn creates database db on c, runs setup in it and begins a
// one-job session on it, closed when the test ends.
func beginIn(ctx context.Context, t *testing.T, c *pgtest.Instance, db, setup string) *Session {
	t.Helper()
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, setup); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := Begin(ctx, SessionOptions{Source: cfg, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	return sess
}

// testReaderByID reads a subset's chunk, rows named by row id, then a
// whole table's, on one reader: the first reads just its rows by a TID
// scan, where the server's settings would scan the table; the second is
// read with the server's settings again.
func testReaderByID(t *testing.T, c *pgtest.Instance) {
	const db = "byid"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Thin rows of a table the planner would rather scan: one per page.
	sess := beginIn(ctx, t, c, db, `CREATE TABLE t (id int, pad text);
		INSERT INTO t SELECT i, repeat('x', 200) FROM generate_series(1, 20000) i; ANALYZE t`)
	r, err := sess.OpenReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	tab := sess.Manifest.Tables[0]
	if err := r.Lock(ctx, tab); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for page := 0; page < 500; page++ {
		ids = append(ids, fmt.Sprintf(`"(%d,1)"`, page))
	}
	keep := archive.Chunk{Keep: "ctid = ANY ('{" + strings.Join(ids, ",") + "}'::pg_catalog.tid[])"}
	plan := func() string {
		rows, err := r.Conn().Query(ctx, "EXPLAIN "+chunk.SelectSQL(tab.Schema, tab.Name, tab.Columns, keep.Keep))
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	if p := plan(); !strings.Contains(p, "Seq Scan") {
		t.Fatalf("with the server's settings, the rows are read by:\n%s\nwant a Seq Scan, which the reader should avoid", p)
	}
	settings := func() string {
		var s string
		if err := r.Conn().QueryRow(ctx, "SELECT current_setting('enable_seqscan') || current_setting('max_parallel_workers_per_gather') || current_setting('jit')").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	server := settings()
	for _, tc := range []struct {
		name  string
		chunk archive.Chunk
		rows  int64
		byID  bool
	}{
		{name: "rows by id", chunk: keep, rows: int64(len(ids)), byID: true},
		{name: "whole table", chunk: archive.Chunk{}, rows: 20000},
	} {
		var out bytes.Buffer
		tag, err := r.CopyTo(ctx, &out, tab, tc.chunk, "UTF8")
		if err != nil {
			t.Fatal(err)
		}
		if tag.RowsAffected() != tc.rows || int64(bytes.Count(out.Bytes(), []byte("\n"))) != tc.rows {
			t.Errorf("%s: read %d rows (%d lines), want %d", tc.name, tag.RowsAffected(), bytes.Count(out.Bytes(), []byte("\n")), tc.rows)
		}
		want := server
		if tc.byID {
			want = "off0off"
		}
		if got := settings(); got != want {
			t.Errorf("after reading %s, settings %q, want %q", tc.name, got, want)
		}
		if p := plan(); tc.byID && (!strings.Contains(p, "Tid Scan") || strings.Contains(p, "Gather")) {
			t.Errorf("the rows by id are read by:\n%s\nwant a Tid Scan, no parallel workers", p)
		}
	}
}

// TestEarlySchema checks the schema pg_dump started beside the catalog
// queries: it is the same archive a pg_dump run afterwards in the same
// snapshot writes (both listed by pg_restore, whose header names no
// time), it can be copied out more than once, and a session closed
// before anyone asks for it stops pg_dump and leaves no connection.
func TestEarlySchema(t *testing.T) {
	c := pgtest.New(t)
	const db = "early"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, `
		CREATE TABLE a (id int PRIMARY KEY, note text);
		CREATE TABLE "B ""q""" (id int REFERENCES a, v text);
		CREATE INDEX ON "B ""q""" (v);
		COMMENT ON TABLE a IS 'early';`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	sess, err := Begin(ctx, SessionOptions{Source: cfg, Jobs: 1, EarlySchema: true})
	if err != nil {
		t.Fatal(err)
	}
	if sess.early == nil {
		t.Fatal("EarlySchema did not start pg_dump")
	}
	var early, again, late bytes.Buffer
	if err := sess.Schema(ctx, &early); err != nil {
		t.Fatal(err)
	}
	if err := sess.Schema(ctx, &again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(early.Bytes(), again.Bytes()) {
		t.Fatal("the early schema differs when copied out twice")
	}
	if err := sess.runPgDump(ctx, &late, 0); err != nil {
		t.Fatal(err)
	}
	list := func(b []byte) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(c.BinDir(), "pg_restore"), "--list")
		cmd.Stdin = bytes.NewReader(b)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(l, ";") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if e, l := list(early.Bytes()), list(late.Bytes()); e != l || !strings.Contains(e, `TABLE public B "q"`) {
		t.Fatalf("early schema lists\n%s\nlate schema lists\n%s", e, l)
	}
	sess.Close(ctx)

	// Closed before the schema is read: pg_dump is stopped, its
	// connection gone.
	closed, err := Begin(ctx, SessionOptions{Source: cfg, Jobs: 1, EarlySchema: true})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close(ctx)
	admin, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions still connected to %s after Close", n, db)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
