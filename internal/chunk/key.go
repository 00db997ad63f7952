package chunk

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// samplePages bounds the pages read to find split points: a table larger
// than this is sampled (TABLESAMPLE SYSTEM reads whole random pages), a
// smaller one is read whole, so its split points are exact.
const samplePages = 4096

// keyChunks cuts t into about n ranges of its integer primary or unique
// key, with split points at the key's quantiles in the snapshot, so that
// gaps in the key do not skew the chunks. It returns nil when t has no
// such key or too few distinct values to split. A key masked says so
// (masked) and is not used: its bounds would be original values.
func keyChunks(ctx context.Context, conn *pgx.Conn, t pg.TableInfo, n int, isMasked func(pg.TableInfo, string) bool) (chunks []Chunk, masked bool, err error) {
	keys, err := findKeys(ctx, conn, t)
	if err != nil {
		return nil, false, err
	}
	col := ""
	for _, k := range keys {
		if isMasked != nil && isMasked(t, k) {
			masked = true
			continue
		}
		col = k
		break
	}
	if col == "" {
		return nil, masked, nil
	}
	bounds, err := quantiles(ctx, conn, t, col, n)
	if err != nil {
		return nil, false, err
	}
	return keyRanges(col, bounds, t.SizeBytes), false, nil
}

// findKeys returns the columns of t's single-column integer primary key
// and of its unique indexes on one integer column (which may be
// nullable), best first, or none.
func findKeys(ctx context.Context, conn *pgx.Conn, t pg.TableInfo) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT a.attname::text
	FROM pg_catalog.pg_index i
	JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = $1 AND i.indisunique AND i.indisvalid AND i.indnatts = 1
		AND i.indpred IS NULL AND i.indexprs IS NULL
		AND a.atttypid IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype, 'pg_catalog.int8'::pg_catalog.regtype)
	ORDER BY i.indisprimary DESC, a.attnotnull DESC, a.attnum`, t.OID)
	if err != nil {
		return nil, fmt.Errorf("find key of %s: %w", t.Qualified(), err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find key of %s: %w", t.Qualified(), err)
	}
	return cols, nil
}

// quantiles returns the distinct n-quantiles (1/n .. (n-1)/n) of col, read
// in the snapshot from the whole table or, for a big one, a page sample.
func quantiles(ctx context.Context, conn *pgx.Conn, t pg.TableInfo, col string, n int) ([]int64, error) {
	fracs := make([]float64, 0, n-1)
	for i := 1; i < n; i++ {
		fracs = append(fracs, float64(i)/float64(n))
	}
	from := "ONLY " + t.Qualified()
	if t.Pages > samplePages {
		from += fmt.Sprintf(" TABLESAMPLE SYSTEM (%g)", 100*float64(samplePages)/float64(t.Pages))
	}
	q := fmt.Sprintf("SELECT percentile_disc($1::float8[]) WITHIN GROUP (ORDER BY %s::int8) FROM %s WHERE %[1]s IS NOT NULL",
		pg.Ident(col), from)
	var vals []*int64
	if err := conn.QueryRow(ctx, q, fracs).Scan(&vals); err != nil {
		return nil, fmt.Errorf("find split points of %s: %w", t.Qualified(), err)
	}
	var bounds []int64
	for _, v := range vals {
		if v != nil {
			bounds = append(bounds, *v)
		}
	}
	slices.Sort(bounds)
	return slices.Compact(bounds), nil
}

// keyRanges turns sorted distinct split points into ranges: below the
// first (with the NULL keys a nullable unique key may hold), between each
// two, and from the last up. Both ends are open, so keys outside the
// sampled range are never lost.
func keyRanges(col string, bounds []int64, size int64) []Chunk {
	if len(bounds) == 0 {
		return nil
	}
	k := pg.Ident(col)
	per := size / int64(len(bounds)+1)
	chunks := make([]Chunk, 0, len(bounds)+1)
	chunks = append(chunks, Chunk{Where: fmt.Sprintf("(%s < %d OR %[1]s IS NULL)", k, bounds[0]), Size: per})
	for i := 1; i < len(bounds); i++ {
		chunks = append(chunks, Chunk{Where: fmt.Sprintf("%[1]s >= %[2]d AND %[1]s < %[3]d", k, bounds[i-1], bounds[i]), Size: per})
	}
	chunks = append(chunks, Chunk{Where: fmt.Sprintf("%s >= %d", k, bounds[len(bounds)-1]), Size: per})
	return chunks
}
