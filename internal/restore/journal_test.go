package restore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestJournalChunkOnce: a chunk's rows commit with its journal row, so a
// chunk loaded a second time under the same step fails and leaves the rows
// of the first load exactly once; a failed load leaves neither rows nor a
// journal row.
func TestJournalChunkOnce(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.Exec(ctx, "postgres", `CREATE TABLE t (i int, s text)`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	j, err := createJournal(ctx, conn, "snap/abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{j: j}
	const rows = "1\ta\n2\tb\n3\tc\n"
	count := func() (n int) {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		data     string
		want     int64
		freeze   bool
		step     string
		wantErr  string
		wantRows int
	}{
		{"first load commits", rows, 3, false, "load stream 1", "", 3},
		{"same step again is refused", rows, 3, false, "load stream 1", "duplicate key", 3},
		{"row count mismatch rolls back", rows, 4, false, "load stream 2", "archive holds 4", 3},
		{"freeze load of the same step is refused and truncates nothing", rows, 3, true, "load stream 1", "duplicate key", 3},
		{"another step commits", "4\td\n", 1, false, "load stream 2", "", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(n int64) error {
				if n != tc.want {
					return fmt.Errorf("loaded %d rows, archive holds %d", n, tc.want)
				}
				return nil
			}
			_, err := r.copyInTx(ctx, conn, "t", "COPY t FROM STDIN", nil, strings.NewReader(tc.data), check, tc.freeze, tc.step, nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatal(err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if n := count(); n != tc.wantRows {
				t.Errorf("%d rows in the table, want %d", n, tc.wantRows)
			}
		})
	}
	got, err := readJournal(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if got.id != "snap/abc" || len(got.done) != 3 || !got.isDone("load stream 1") || !got.isDone("load stream 2") || got.isDone("load stream 3") {
		t.Errorf("journal read back as %+v", got)
	}
}

// TestCheckJournal: what an existing journal means for each combination of
// --resume and --clean.
func TestCheckJournal(t *testing.T) {
	mine := &journal{id: "a", done: map[string]bool{stepBegin: true}}
	theirs := &journal{id: "b", done: map[string]bool{stepBegin: true}}
	for _, tc := range []struct {
		name          string
		found         *journal
		resume, clean bool
		wantErr       string
	}{
		{"no journal", nil, false, false, ""},
		{"no journal, resume", nil, true, false, ""},
		{"unfinished restore without --resume", mine, false, false, "use --resume"},
		{"unfinished restore, --clean starts over", theirs, false, true, ""},
		{"resume", mine, true, false, ""},
		{"resume with another archive", theirs, true, false, "another archive"},
		{"resume with another archive and --clean", theirs, true, true, "another archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &run{opts: Options{Resume: tc.resume, Clean: tc.clean}, target: &pgx.ConnConfig{}}
			err := r.checkJournal(tc.found, "a")
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestJournalManifest: the manifest saved with the journal reads back with
// the journal's identity (so a resumed clone's ArchiveID matches); no
// journal reads as nil; a journal saved without a plan cannot be resumed
// as a clone.
func TestJournalManifest(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	cfg, err := pgx.ParseConfig(c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ReadJournalManifest(ctx, cfg); m != nil || err != nil {
		t.Fatalf("no journal: got %v, %v", m, err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	comment := "a <comment> & 'quotes'"
	m := &archive.Manifest{Snapshot: "00000003-0000001B-1", SnapshotTime: time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("x", 3600)),
		Tables:       []archive.Table{{Schema: "s", Name: "t\"x", Columns: []string{"a", "b"}, SizeBytes: 1 << 30}},
		Chunks:       []archive.Chunk{{Stream: 1, Table: 0, Where: "ctid < '(10,0)'", Size: 5}, {Stream: 2, Table: 0}},
		LargeObjects: []archive.LargeObject{{Stream: 3, OID: 42, Owner: "o", Comment: &comment}},
	}
	id := ArchiveID(m)
	if _, err := createJournal(ctx, conn, id, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJournalManifest(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || ArchiveID(got) != id || got.Chunks[0].Where != m.Chunks[0].Where || *got.LargeObjects[0].Comment != comment {
		t.Fatalf("manifest read back as %+v, identity %s, want %s", got, ArchiveID(got), id)
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+JournalSchema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if _, err := createJournal(ctx, conn, "snap/abc", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJournalManifest(ctx, cfg); err == nil || !strings.Contains(err.Error(), "no saved plan") {
		t.Fatalf("journal without a plan: got %v", err)
	}
}
