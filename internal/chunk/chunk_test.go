package chunk

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func TestCtidRanges(t *testing.T) {
	for _, tc := range []struct {
		pages int64
		n     int
		want  []string
	}{
		{0, 4, []string{""}},
		{1, 4, []string{""}},
		{10, 1, []string{""}},
		{2, 4, []string{"ctid < '(1,0)'", "ctid >= '(1,0)'"}},
		{10, 3, []string{"ctid < '(3,0)'", "ctid >= '(3,0)' AND ctid < '(6,0)'", "ctid >= '(6,0)'"}},
	} {
		var got []string
		for _, c := range ctidRanges(tc.pages, tc.n, 8192) {
			got = append(got, c.Where)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ctidRanges(%d, %d) = %q, want %q", tc.pages, tc.n, got, tc.want)
		}
	}
}

func TestKeyRanges(t *testing.T) {
	for _, tc := range []struct {
		bounds []int64
		want   []string
	}{
		{nil, nil},
		{[]int64{5}, []string{`("id" < 5 OR "id" IS NULL)`, `"id" >= 5`}},
		{[]int64{-3, 7, 100}, []string{`("id" < -3 OR "id" IS NULL)`, `"id" >= -3 AND "id" < 7`, `"id" >= 7 AND "id" < 100`, `"id" >= 100`}},
	} {
		var got []string
		for _, c := range keyRanges("id", tc.bounds, 100) {
			got = append(got, c.Where)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("keyRanges(%v) = %q, want %q", tc.bounds, got, tc.want)
		}
	}
}

func TestChunkCount(t *testing.T) {
	for _, tc := range []struct {
		size int64
		opts Options
		want int
	}{
		{100, Options{ChunkSize: 0, Jobs: 4}, 1},
		{100, Options{ChunkSize: 100, Jobs: 4}, 1},
		{101, Options{ChunkSize: 100, Jobs: 4}, 16},
		{10000, Options{ChunkSize: 100, Jobs: 2}, 100},
		{1 << 40, Options{ChunkSize: 1, Jobs: 2}, maxChunks},
	} {
		if got := chunkCount(tc.size, tc.opts); got != tc.want {
			t.Errorf("chunkCount(%d, %+v) = %d, want %d", tc.size, tc.opts, got, tc.want)
		}
	}
}

func TestLargestFirst(t *testing.T) {
	got := []int64{3, 9, 1, 9, 5}
	LargestFirst(got, func(v int64) int64 { return v })
	if want := []int64{9, 9, 5, 3, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("LargestFirst = %v, want %v", got, want)
	}
}

// TestSplitOnServer plans real tables and checks every plan by counting
// each chunk's rows: they must add up to the table (nothing lost, nothing
// twice), key ranges must be balanced despite gaps in the key, and no
// chunk query may scan the whole table. A masked key is never a bound:
// ctid ranges instead (PostgreSQL 14+), else the whole table.
func TestSplitOnServer(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.Exec(ctx, "postgres", `
		-- a gapped key: dense runs far apart, so min/max arithmetic would
		-- put nearly every row into one chunk
		CREATE TABLE gapped (id int8 PRIMARY KEY, pad text);
		INSERT INTO gapped SELECT g * 1000000 + s, repeat('x', 100)
			FROM generate_series(0, 3) g, generate_series(1, 5000) s;
		INSERT INTO gapped SELECT 9000000000 + s, repeat('x', 100) FROM generate_series(1, 20000) s;
		-- a nullable unique key with NULLs
		CREATE TABLE nullable (k int4 UNIQUE, pad text);
		INSERT INTO nullable SELECT CASE WHEN s % 10 = 0 THEN NULL ELSE s END, repeat('y', 100)
			FROM generate_series(1, 20000) s;
		CREATE TABLE "no key" (a text, b int);
		INSERT INTO "no key" SELECT repeat('z', 100), s FROM generate_series(1, 20000) s;
		CREATE TABLE nocols ();
		INSERT INTO nocols SELECT FROM generate_series(1, 50000);
		ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	srv, err := pg.ReadServer(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pg.ListTables(ctx, conn, srv)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]pg.TableInfo{}
	for _, tb := range tables {
		byName[tb.Name] = tb
	}
	opts := Options{ChunkSize: 64 << 10, Jobs: 2}
	seenGappedKey := false

	for _, tc := range []struct {
		table    string
		method   Method
		minParts int
		balanced bool // each chunk within 2x of the mean
	}{
		{"gapped", Key, 8, true},
		{"nullable", Key, 8, false}, // the first chunk also holds the 10% NULLs
		{"no key", Key, 1, false},
		{"gapped", CTID, 8, true},
		{"no key", CTID, 8, true},
		{"nocols", CTID, 8, true},
		{"nocols", Auto, 8, true},
		{"gapped", Key, 8, true}, // masked: its id is no bound (see below)
	} {
		masked := seenGappedKey && tc.table == "gapped" && tc.method == Key
		seenGappedKey = seenGappedKey || (tc.table == "gapped" && tc.method == Key)
		t.Run(fmt.Sprintf("%s by %s, masked %v", tc.table, tc.method, masked), func(t *testing.T) {
			tb := byName[tc.table]
			o := opts
			o.Method = tc.method
			if masked {
				// --mask: the key's values are never bounds; ctid
				// ranges where the server reads them, else one chunk.
				o.Masked = func(pg.TableInfo, string) bool { return true }
				tc.method = CTID
			}
			chunks, err := Split(ctx, conn, srv, tb, o)
			if masked {
				for _, ch := range chunks {
					if strings.Contains(ch.Where, `"id"`) {
						t.Fatalf("a masked key is a chunk bound: %s", ch.Where)
					}
				}
				if srv.VersionNum < 140000 {
					if err != nil || len(chunks) != 1 {
						t.Fatalf("masked key before PostgreSQL 14: %d chunks, %v; want the whole table", len(chunks), err)
					}
					return
				}
			}
			if tc.method != Key && srv.VersionNum < 140000 {
				if err == nil && tc.method == CTID {
					t.Fatal("split by ctid before PostgreSQL 14 succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(chunks) < tc.minParts {
				t.Fatalf("%d chunks, want at least %d: %+v", len(chunks), tc.minParts, chunks)
			}
			var total, sum int64
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+tb.Qualified()).Scan(&total); err != nil {
				t.Fatal(err)
			}
			counts := make([]int64, len(chunks))
			for i, ch := range chunks {
				q := SelectSQL(tb.Schema, tb.Name, tb.Columns, ch.Where)
				if ch.Where != "" {
					requireNoSeqScan(t, ctx, conn, srv, q, tc.method)
				}
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM ("+q+") q").Scan(&counts[i]); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				sum += counts[i]
			}
			if sum != total {
				t.Fatalf("chunks hold %d rows, table %d: %v", sum, total, counts)
			}
			if tc.balanced {
				mean := total / int64(len(chunks))
				for i, n := range counts {
					if n > 2*mean+1 || n < mean/2 {
						t.Errorf("chunk %d (%s) holds %d rows, mean %d: %v", i, chunks[i].Where, n, mean, counts)
					}
				}
			}
		})
	}
}

// requireNoSeqScan fails if the exact chunk query would read the whole
// table: ctid ranges must be TID Range Scans on PostgreSQL 14+.
func requireNoSeqScan(t *testing.T, ctx context.Context, conn *pgx.Conn, srv pg.Server, q string, m Method) {
	t.Helper()
	// Small test tables make a sequential scan look cheap; forbid it so
	// that EXPLAIN shows whether the range can be read any other way.
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET enable_seqscan")
	plan, err := Explain(ctx, conn, q)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("chunk query runs as a sequential scan:\n%s\n%s", q, plan)
	}
	if m != Key && srv.VersionNum >= 140000 && !strings.Contains(plan, "Tid Range Scan") {
		t.Errorf("ctid chunk query is not a TID Range Scan:\n%s\n%s", q, plan)
	}
}
