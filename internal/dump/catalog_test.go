package dump

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// queryCounter is a pgx tracer that counts the queries a connection sends.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// testCatalogQueries checks that the leader's work before the data (the
// snapshot, the preflight checks, the catalog and the chunk plan) is a
// fixed number of queries, whatever the number of tables: at 10,000
// small tables a query per table was what made a dump slower than
// pg_dump --schema-only alone, beside which it runs. It counts the
// queries Begin sends for 12 tables and for 48 (pgtest.SmallTables:
// primary keys, indexes, foreign keys), and checks each plan has a chunk
// per table.
func testCatalogQueries(t *testing.T, c *pgtest.Instance) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	count := func(tables int) int64 {
		t.Helper()
		db := fmt.Sprintf("catalog_%d", tables)
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		for _, stmt := range pgtest.SmallTables(tables) {
			if err := c.Exec(ctx, db, stmt); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := pgx.ParseConfig(c.ConnString(db))
		if err != nil {
			t.Fatal(err)
		}
		q := &queryCounter{}
		cfg.Tracer = q
		sess, err := Begin(ctx, SessionOptions{Source: cfg, Jobs: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(ctx)
		if len(sess.Manifest.Tables) != tables || len(sess.Manifest.Chunks) != tables {
			t.Fatalf("%d tables: planned %d tables in %d chunks", tables, len(sess.Manifest.Tables), len(sess.Manifest.Chunks))
		}
		return q.n.Load()
	}
	few, many := count(12), count(48)
	if few == 0 || many != few {
		t.Errorf("Begin sent %d queries for 12 tables and %d for 48: the catalog is read with a query per table", few, many)
	}
}
