package dump

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// unit is one piece of work for a data worker: a chunk or a large object.
type unit struct {
	chunk *archive.Chunk
	lo    *archive.LargeObject
	size  int64 // for largest-first ordering
}

// planUnits orders the work largest first, so that the longest unit never
// starts last and leaves the other workers idle at the end.
func planUnits(m *archive.Manifest) []unit {
	var us []unit
	for i := range m.Chunks {
		c := &m.Chunks[i]
		us = append(us, unit{chunk: c, size: m.Tables[c.Table].SizeBytes})
	}
	for i := range m.LargeObjects {
		us = append(us, unit{lo: &m.LargeObjects[i]})
	}
	sort.SliceStable(us, func(i, j int) bool { return us[i].size > us[j].size })
	return us
}

// worker imports the snapshot on its own connection and dumps units until
// the channel closes. It returns the rows it copied.
func worker(ctx context.Context, opts Options, w *archive.Writer, snapID string, m *archive.Manifest, units <-chan unit) (int64, error) {
	conn, err := pg.Connect(ctx, opts.Source)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := pg.ImportSnapshot(ctx, conn, snapID); err != nil {
		return 0, err
	}
	if err := setCopyEncoding(ctx, conn, m.Encoding); err != nil {
		return 0, err
	}
	var rows int64
	for u := range units {
		switch {
		case u.chunk != nil:
			n, err := copyChunk(ctx, conn, w, m, u.chunk, opts.BlockSize)
			if err != nil {
				return rows, err
			}
			rows += n
		case u.lo != nil:
			if err := copyLargeObject(ctx, conn, w, u.lo, opts.BlockSize); err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// setCopyEncoding keeps COPY bytes exactly as stored in a SQL_ASCII
// database, where converting to UTF8 would reject non-UTF8 bytes on restore.
// Other encodings convert to and from UTF8 losslessly.
func setCopyEncoding(ctx context.Context, conn *pgx.Conn, enc string) error {
	if enc != "SQL_ASCII" {
		return nil
	}
	if _, err := conn.Exec(ctx, "SET client_encoding TO 'SQL_ASCII'"); err != nil {
		return fmt.Errorf("set client encoding: %w", err)
	}
	return nil
}

// CopyOutSQL is the statement that reads one chunk. Generated columns are
// left out (the target computes them), as pg_dump does.
func CopyOutSQL(t archive.Table, c archive.Chunk) string {
	rel := pg.Qualified(t.Schema, t.Name)
	if c.Where == "" {
		return fmt.Sprintf("COPY %s%s TO STDOUT", rel, pg.CopyColumns(t.Columns))
	}
	return fmt.Sprintf("COPY (SELECT %s FROM ONLY %s WHERE %s) TO STDOUT", pg.ColumnList(t.Columns), rel, c.Where)
}

func copyChunk(ctx context.Context, conn *pgx.Conn, w *archive.Writer, m *archive.Manifest, c *archive.Chunk, blockSize int) (int64, error) {
	t := m.Tables[c.Table]
	name := pg.Qualified(t.Schema, t.Name)
	bw := archive.NewBlockWriter(w.Stream(archive.KindData, c.Stream), blockSize)
	tag, err := conn.PgConn().CopyTo(ctx, bw, CopyOutSQL(t, *c))
	if err != nil {
		return 0, fmt.Errorf("dump table %s: %w", name, pg.ExplainLost(err))
	}
	if err := bw.Close(); err != nil {
		return 0, fmt.Errorf("dump table %s: %w", name, err)
	}
	if got := bw.Rows(); got != tag.RowsAffected() {
		return 0, fmt.Errorf("dump table %s: server sent %d rows but %d were written", name, tag.RowsAffected(), got)
	}
	return tag.RowsAffected(), nil
}

func copyLargeObject(ctx context.Context, conn *pgx.Conn, w *archive.Writer, lo *archive.LargeObject, blockSize int) error {
	s := w.Stream(archive.KindLargeObject, lo.Stream)
	err := pg.ReadLargeObject(ctx, conn, lo.OID, blockSize, func(b []byte) error {
		return s.WriteBlock(b, 0)
	})
	if err != nil {
		return err
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("dump large object %d: %w", lo.OID, err)
	}
	return nil
}
