package sqlscript

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// block is one frame of a test data stream: its bytes and the row count
// the writer records for it.
type block struct {
	data string
	rows int64
}

// rows makes n COPY text rows of table t, numbered from first.
func rows(first, n int) string {
	var b strings.Builder
	for i := first; i < first+n; i++ {
		fmt.Fprintf(&b, "%d\trow-%04d with a\\ttab\n", i, i)
	}
	return b.String()
}

// testArchive writes a data-only archive (so that no pg_restore runs)
// with uncompressed frames: two chunks of table public.t, given as blocks,
// one large object and a sequence. It returns the archive's bytes.
func testArchive(t *testing.T, chunk1, chunk2 []block) []byte {
	t.Helper()
	m := &archive.Manifest{
		ToolVersion:  "test",
		Database:     "db",
		Encoding:     "UTF8",
		SnapshotTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		DataOnly:     true,
		SchemaStream: 1,
		Tables:       []archive.Table{{Schema: "public", Name: "t", Columns: []string{"id", "note"}}},
		Chunks:       []archive.Chunk{{Stream: 2, Table: 0}, {Stream: 3, Table: 0}},
		LargeObjects: []archive.LargeObject{{Stream: 4, OID: 424242, Owner: "postgres", Size: 5}},
		Sequences:    []archive.Sequence{{Schema: "public", Name: "t_id_seq", LastValue: 300, IsCalled: true}},
	}
	w, out := archivetest.NewWriter(t, m)
	write := func(kind archive.Kind, id uint32, blocks []block) {
		s := w.Stream(kind, id)
		for _, b := range blocks {
			if err := s.WriteBlock([]byte(b.data), b.rows); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(archive.KindSchema, 1, []block{{data: "not read: the archive is data-only"}})
	write(archive.KindData, 2, chunk1)
	write(archive.KindData, 3, chunk2)
	write(archive.KindLargeObject, 4, []block{{data: "hello"}})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// finishing is a source that reports at its end, as a pipe's Demux does.
type finishing struct {
	*archive.Reader
	err error
}

func (f finishing) Finish() error { return f.err }

// parsed is a written script cut into what the tests look at.
type parsed struct {
	text   string
	copies [][]string // the rows of each COPY block, in order
	open   bool       // the last COPY block was never ended
}

func parse(text string) parsed {
	p := parsed{text: text}
	var cur []string
	in := false
	for _, l := range strings.SplitAfter(text, "\n") {
		switch {
		case in && l == "\\.\n":
			p.copies = append(p.copies, cur)
			cur, in = nil, false
		case in:
			cur = append(cur, l)
		case strings.HasPrefix(l, "COPY "):
			in = true
		}
	}
	p.open = in
	return p
}

// TestScriptStructure writes scripts from sound and damaged archives and
// checks what makes a script all or nothing: ON_ERROR_STOP and BEGIN before
// any data, COPY blocks of whole rows that are exactly the archive's rows,
// COMMIT once and only at the very end of a sound archive, and for a
// damaged one the open COPY ended after its last whole row, a RAISE, no
// sequence values and no COMMIT.
func TestScriptStructure(t *testing.T) {
	pgtest.RequireBinaries(t) // Write looks for pg_restore
	sound1 := []block{{rows(1, 100), 100}, {rows(101, 100), 100}}
	sound2 := []block{{rows(201, 50), 50}}
	for _, tc := range []struct {
		name           string
		chunk1, chunk2 []block
		damage         func([]byte) // applied to the archive's bytes
		finishErr      error
		err            string   // the error Write must return, "" for none
		copies         []string // the rows each COPY block must hold
	}{
		{name: "sound", chunk1: sound1, chunk2: sound2,
			copies: []string{rows(1, 200), rows(201, 50)}},
		{name: "flipped byte in a later frame", chunk1: sound1, chunk2: sound2,
			damage: func(b []byte) { b[bytes.Index(b, []byte("row-0150"))] ^= 1 },
			err:    `table "public"."t" (stream 2)`, copies: []string{rows(1, 100)}},
		{name: "data ends inside a row", chunk1: []block{{rows(1, 10) + "11\tcut sh", 10}}, chunk2: sound2,
			err: "the data ends inside a row", copies: []string{rows(1, 10)}},
		{name: "row count differs", chunk1: sound1, chunk2: []block{{rows(201, 50), 51}},
			err: "50 rows read, archive holds 51", copies: []string{rows(1, 200), rows(201, 50)}},
		{name: "source fails at its end", chunk1: sound1, chunk2: sound2, finishErr: errors.New("pipe cut after the last frame"),
			err: "pipe cut after the last frame", copies: []string{rows(1, 200), rows(201, 50)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testArchive(t, tc.chunk1, tc.chunk2)
			if tc.damage != nil {
				tc.damage(b)
			}
			r, err := archive.Open(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			var src archive.Source = r
			if tc.finishErr != nil {
				src = finishing{r, tc.finishErr}
			}
			var out bytes.Buffer
			err = Write(context.Background(), src, &out, Options{})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Write error = %v, want %q", err, tc.err)
			}
			p := parse(out.String())
			text := p.text

			top := strings.Index(text, "\\set ON_ERROR_STOP on\nBEGIN;\n")
			if top < 0 || top > strings.Index(text, "\nCOPY ") {
				t.Errorf("ON_ERROR_STOP and BEGIN do not come before the first COPY:\n%.400s", text)
			}
			if p.open {
				t.Error("the script ends inside a COPY block")
			}
			if len(p.copies) != len(tc.copies) {
				t.Fatalf("%d COPY blocks, want %d", len(p.copies), len(tc.copies))
			}
			for i, want := range tc.copies {
				if got := strings.Join(p.copies[i], ""); got != want {
					t.Errorf("COPY block %d holds %d rows, want %d (whole rows, exactly the archive's)", i, len(p.copies[i]), strings.Count(want, "\n"))
				}
			}
			raise := strings.Contains(text, "RAISE EXCEPTION")
			setval := strings.Contains(text, `pg_catalog.setval('"public"."t_id_seq"', 300, true)`)
			if tc.err == "" {
				if !strings.HasSuffix(text, "\nCOMMIT;\n") || strings.Count(text, "COMMIT") != 1 || raise || !setval {
					t.Errorf("sound script: COMMIT once at the end %v, RAISE %v, setval %v:\n%s", strings.HasSuffix(text, "\nCOMMIT;\n"), raise, setval, tail(text))
				}
				if !strings.Contains(text, "lo_create(424242)") || !strings.Contains(text, `lo_put(424242, 0, '\x68656c6c6f'::bytea)`) {
					t.Errorf("large object missing:\n%s", tail(text))
				}
				return
			}
			if strings.Contains(text, "COMMIT") || !raise || setval {
				t.Errorf("damaged script: COMMIT %v, RAISE %v, setval %v:\n%s", strings.Contains(text, "COMMIT"), raise, setval, tail(text))
			}
			if !strings.HasSuffix(strings.TrimSpace(text), "END$pgsprint$;") {
				t.Errorf("the RAISE is not the script's last statement:\n%s", tail(text))
			}
		})
	}
}

// TestScriptLoads loads a sound script and a damaged one with psql: the
// sound one commits every row and the large object; the damaged one stops
// psql with the RAISE's message and leaves the table as it was.
func TestScriptLoads(t *testing.T) {
	c := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name   string
		damage bool
		rows   int
	}{{"sound", false, 250}, {"damaged", true, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			db := "load_" + tc.name
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			if err := c.Exec(ctx, db, "CREATE TABLE t (id int PRIMARY KEY, note text); CREATE SEQUENCE t_id_seq"); err != nil {
				t.Fatal(err)
			}
			b := testArchive(t, []block{{rows(1, 100), 100}, {rows(101, 100), 100}}, []block{{rows(201, 50), 50}})
			if tc.damage {
				b[bytes.Index(b, []byte("row-0220"))] ^= 1
			}
			r, err := archive.Open(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := Write(ctx, r, &out, Options{}); (err != nil) != tc.damage {
				t.Fatalf("Write: %v", err)
			}
			err = c.ExecPsql(ctx, db, out.String())
			if tc.damage != (err != nil) || tc.damage && !strings.Contains(err.Error(), "pgsprint could not read the archive to its end") {
				t.Fatalf("psql: %v", err)
			}
			conn, err := pgx.Connect(ctx, c.ConnString(db))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var n, los, seq int
			var sum string
			if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(id)::text || string_agg(note, ',' ORDER BY id), ''),
				(SELECT count(*) FROM pg_largeobject_metadata WHERE oid = 424242), (SELECT last_value FROM t_id_seq) FROM t`).Scan(&n, &sum, &los, &seq); err != nil {
				t.Fatal(err)
			}
			want := [3]int{0, 0, 1}
			if !tc.damage {
				want = [3]int{250, 1, 300}
				if !strings.HasPrefix(sum, "31375row-0001 with a\ttab,row-0002") {
					t.Errorf("loaded rows: %.60s", sum)
				}
			}
			if got := [3]int{n, los, seq}; got != want {
				t.Errorf("rows, large objects, sequence value = %v, want %v", got, want)
			}
		})
	}
}

func tail(s string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-12):], "\n")
}
