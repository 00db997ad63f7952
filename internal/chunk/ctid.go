package chunk

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// tidRangeUsable reports whether the server reads a ctid range of t with a
// TID Range Scan (PostgreSQL 14 and later, unless the planner is told not
// to). Without one every chunk would scan the whole table.
func tidRangeUsable(ctx context.Context, conn *pgx.Conn, srv pg.Server, t pg.TableInfo) (bool, error) {
	if !srv.HasTIDRangeScan() {
		return false, nil
	}
	return IsTIDRangeScan(ctx, conn, SelectSQL(t.Schema, t.Name, t.Columns, ctidRange(1, 2)))
}

// IsTIDRangeScan EXPLAINs query and reports whether its plan reads the
// table with a TID Range Scan.
func IsTIDRangeScan(ctx context.Context, conn *pgx.Conn, query string) (bool, error) {
	plan, err := Explain(ctx, conn, query)
	if err != nil {
		return false, err
	}
	return strings.Contains(plan, "Tid Range Scan"), nil
}

// Explain returns the text of EXPLAIN query, one plan line per line.
func Explain(ctx context.Context, conn *pgx.Conn, query string) (string, error) {
	lines, err := pg.QueryStrings(ctx, conn, "EXPLAIN "+query)
	if err != nil {
		return "", fmt.Errorf("explain chunk query: %w", err)
	}
	return strings.Join(lines, "\n"), nil
}

// ctidChunks cuts t into n page ranges, or returns nil when the server
// does not read them with a TID Range Scan (tidRangeUsable). The page
// count is the larger of relpages (as of the last VACUUM/ANALYZE) and the
// file's actual size, and the last range is open-ended anyway, so rows in
// pages added since are read by the last chunk.
func ctidChunks(ctx context.Context, conn *pgx.Conn, srv pg.Server, t pg.TableInfo, n int) ([]Chunk, error) {
	if ok, err := tidRangeUsable(ctx, conn, srv, t); err != nil || !ok {
		return nil, err
	}
	var blockSize int64
	if err := conn.QueryRow(ctx, "SELECT current_setting('block_size')::int8").Scan(&blockSize); err != nil {
		return nil, fmt.Errorf("read block size: %w", err)
	}
	pages := max(t.Pages, (t.SizeBytes+blockSize-1)/blockSize)
	return ctidRanges(pages, n, blockSize), nil
}

// ctidRanges cuts pages into at most n contiguous ranges of whole pages:
// the first from page 0 (implicitly: no lower bound), the last with no
// upper bound.
func ctidRanges(pages int64, n int, blockSize int64) []Chunk {
	n = int(min(int64(n), pages))
	if n < 2 {
		return []Chunk{{Size: pages * blockSize}}
	}
	chunks := make([]Chunk, 0, n)
	var lo int64
	for i := 1; i <= n; i++ {
		hi := pages * int64(i) / int64(n)
		var where string
		switch {
		case i == 1:
			where = fmt.Sprintf("ctid < '(%d,0)'", hi)
		case i == n:
			where = fmt.Sprintf("ctid >= '(%d,0)'", lo)
		default:
			where = ctidRange(lo, hi)
		}
		chunks = append(chunks, Chunk{Where: where, Size: (hi - lo) * blockSize})
		lo = hi
	}
	return chunks
}

// ctidRange selects the rows in pages [lo, hi).
func ctidRange(lo, hi int64) string {
	return fmt.Sprintf("ctid >= '(%d,0)' AND ctid < '(%d,0)'", lo, hi)
}
