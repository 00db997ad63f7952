package restore

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestResetPartialTables: on resume, a table whose whole-table chunk is not
// journaled but holds rows (the committed parts of an interrupted split
// load) is emptied; a journaled chunk's table, and a table loaded in range
// chunks (each its own transaction), are left alone.
func TestResetPartialTables(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.Exec(ctx, "postgres", `CREATE TABLE partial (i int); INSERT INTO partial VALUES (1), (2);
CREATE TABLE finished (i int); INSERT INTO finished VALUES (1);
CREATE TABLE ranges (i int); INSERT INTO ranges VALUES (1);`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := journal.Create(ctx, conn, "snap/x", nil, journal.StepPreData, chunkStep(2)); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Read(ctx, conn) // as a resumed run finds it
	if err != nil {
		t.Fatal(err)
	}
	m := &archive.Manifest{
		Tables: []archive.Table{{Schema: "public", Name: "partial"}, {Schema: "public", Name: "finished"}, {Schema: "public", Name: "ranges"}},
		Chunks: []archive.Chunk{{Stream: 1, Table: 0}, {Stream: 2, Table: 1}, {Stream: 3, Table: 2, Where: "ctid < '(10,0)'"}},
	}
	tg := &target{cfg: cfg, j: j, resumed: 2}
	sel := &selection{m: m}
	r := newDataStage(Options{}, nil, &openedSource{}, sel, statistics{}, tg, nil, slog.New(slog.DiscardHandler), nil)
	if err := r.resetPartialTables(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table string
		want  int
	}{{"partial", 0}, {"finished", 1}, {"ranges", 1}} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+tc.table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != tc.want {
			t.Errorf("%s: %d rows after reset, want %d", tc.table, n, tc.want)
		}
	}
}
