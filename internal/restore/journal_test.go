package restore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestJournalChunkOnce: a chunk's rows commit with its journal row, so a
// chunk loaded a second time under the same step fails and leaves the rows
// of the first load exactly once; a failed load leaves neither rows nor a
// journal row. Work fused after the COPY (a tail) commits with it, its
// steps recorded with the load's; a failing tail commits nothing. A whole
// table's chunks (several pieces) commit together or not at all.
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
	j, err := journal.Create(ctx, conn, "snap/abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &loader{j: j}
	const rows = "1\ta\n2\tb\n3\tc\n"
	count := func() (n int) {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		data     []string // one stream per piece
		want     []int64  // the rows each piece's check expects
		freeze   bool
		steps    []string // each piece's
		wantErr  string
		wantRows int
		then     tail
	}{
		{"first load commits", []string{rows}, []int64{3}, false, []string{"load stream 1"}, "", 3, tail{}},
		{"same step again is refused", []string{rows}, []int64{3}, false, []string{"load stream 1"}, "duplicate key", 3, tail{}},
		{"row count mismatch rolls back", []string{rows}, []int64{4}, false, []string{"load stream 2"}, "archive holds 4", 3, tail{}},
		{"freeze load of the same step is refused and truncates nothing", []string{rows}, []int64{3}, true, []string{"load stream 1"}, "duplicate key", 3, tail{}},
		{"bad row rolls back the rows before it", []string{"5\te\nx\tf\n"}, []int64{2}, false, []string{"load stream 3"}, "invalid input syntax", 3, tail{}},
		{"failing tail rolls back the load and its steps", []string{"4\td\n"}, []int64{1}, false, []string{"load stream 2"}, "no_such_column", 3,
			tail{sql: []string{"CREATE INDEX t_i ON t (i)", "CREATE INDEX t_x ON t (no_such_column)"}, steps: []string{"index t_i", "index t_x"}}},
		{"another step commits with its tail", []string{"4\td\n"}, []int64{1}, false, []string{"load stream 2"}, "", 4,
			tail{sql: []string{"CREATE INDEX t_i ON t (i)", "ANALYZE t"}, steps: []string{"index t_i", "analyze t"}}},
		{"a whole table's second chunk failing rolls back its first and the TRUNCATE", []string{"5\te\n", "x\tf\n"}, []int64{1, 1}, true,
			[]string{"load stream 5", "load stream 6"}, "invalid input syntax", 4, tail{}},
		{"a whole table's chunks commit together", []string{"6\tg\n", "7\th\n8\ti\n"}, []int64{1, 2}, true,
			[]string{"load stream 7", "load stream 8"}, "", 3, tail{sql: []string{"ANALYZE t"}, steps: []string{"analyze t again"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pieces []piece
			for i, data := range tc.data {
				pieces = append(pieces, piece{
					stmt: pg.Copy{Schema: "public", Table: "t"},
					open: func() io.ReadCloser { return io.NopCloser(strings.NewReader(data)) },
					check: func(n int64) error {
						if n != tc.want[i] {
							return fmt.Errorf("loaded %d rows, archive holds %d", n, tc.want[i])
						}
						return nil
					},
					step: tc.steps[i],
				})
			}
			_, err := r.copyInTx(ctx, conn, "t", pieces, tc.freeze, tc.then)
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
	got, err := journal.Read(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != "snap/abc" || got.Finished() != 7 || !got.IsDone("load stream 1") || !got.IsDone("load stream 2") || got.IsDone("load stream 3") ||
		!got.IsDone("index t_i") || !got.IsDone("analyze t") || got.IsDone("index t_x") ||
		got.IsDone("load stream 5") || got.IsDone("load stream 6") || !got.IsDone("load stream 7") || !got.IsDone("load stream 8") || !got.IsDone("analyze t again") {
		t.Errorf("journal read back as %+v", got)
	}
	// ANALYZE in the load's transaction counted the rows it inserted
	// (the whole table's load truncated the 4 before it).
	var tuples float64
	if err := conn.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'public.t'::regclass").Scan(&tuples); err != nil || tuples != 3 {
		t.Errorf("reltuples after the fused ANALYZE: %v (%v), want 3", tuples, err)
	}
}

// TestCheckJournal: what an existing journal means for each combination of
// --resume and --clean.
func TestCheckJournal(t *testing.T) {
	const mine, theirs = "a", "b"
	for _, tc := range []struct {
		name          string
		found         string
		resume, clean bool
		wantErr       string
	}{
		{"no journal", "", false, false, ""},
		{"no journal, resume", "", true, false, ""},
		{"unfinished restore without --resume", mine, false, false, "use --resume"},
		{"unfinished restore, --clean starts over", theirs, false, true, ""},
		{"resume", mine, true, false, ""},
		{"resume with another archive", theirs, true, false, "another archive"},
		{"resume with another archive and --clean", theirs, true, true, "another archive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &preData{opts: Options{Resume: tc.resume, Clean: tc.clean}, target: &pgx.ConnConfig{}}
			err := r.checkJournal(tc.found, "a")
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}
