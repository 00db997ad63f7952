// Package chunk cuts big tables into chunks that dump workers read in
// parallel inside one snapshot, and orders work largest first.
//
// A database that is mostly one table would otherwise be dumped by one
// worker while the others idle. Chunks are ctid page ranges on PostgreSQL
// 14 and later (each read by a TID Range Scan), or ranges of an integer
// primary or unique key elsewhere, never a masked one (its bounds would
// be original values in the manifest). Every plan's first and last range
// is open-ended, so no row is lost when the catalog's size estimates are
// stale.
package chunk

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// DefaultSize is the size above which a table is split, and the
// size of its chunks: big enough that per-chunk overhead (a query, a
// stream in the archive) is noise, small enough that the last chunks of a
// big table finish close together.
const DefaultSize = 64 << 20

// chunksPerJob is how many chunks per worker a split table gets at least,
// so that uneven chunks (pages of different density) still keep every
// worker busy until the end.
const chunksPerJob = 4

// maxChunks bounds the chunks of one table, which bounds the manifest.
const maxChunks = 10000

// Method is how a table is split.
type Method string

// The splitting methods. Auto uses ctid ranges where the server runs them
// as TID Range Scans (PostgreSQL 14 and later), else integer key ranges.
const (
	Auto Method = "auto"
	CTID Method = "ctid"
	Key  Method = "key"
)

// ParseMethod reads a --split-by value.
func ParseMethod(s string) (Method, error) {
	switch m := Method(s); m {
	case Auto, CTID, Key:
		return m, nil
	}
	return "", fmt.Errorf("unknown split method %q (want auto, ctid or key)", s)
}

// Options configure splitting.
type Options struct {
	// ChunkSize splits tables larger than it into chunks of about this
	// size; 0 or less never splits.
	ChunkSize int64
	// Jobs is the number of workers; a split table gets at least
	// chunksPerJob chunks per worker.
	Jobs   int
	Method Method
	// Masked says whether a column of a table is masked (dump --mask).
	// Key ranges would write its original values into the manifest as
	// bounds, so a table is never split on a masked key: it is split by
	// ctid where the server reads ctid ranges, else read whole. Nil: none.
	Masked func(t pg.TableInfo, column string) bool
}

// Chunk is one range of a table.
type Chunk struct {
	// Where selects the range; empty for the whole table.
	Where string
	// Size is the estimated bytes of the range, for largest-first order.
	Size int64
	// Keep narrows the range to a subset's rows (archive.Chunk.Keep).
	Keep string
}

// Split returns the chunks of t, read inside conn's snapshot. A table that
// is not split is one chunk with t's own filter (extension configuration
// tables carry one; they are never split).
func Split(ctx context.Context, conn *pgx.Conn, srv pg.Server, t pg.TableInfo, opts Options) ([]Chunk, error) {
	whole := []Chunk{{Where: t.Where, Size: t.SizeBytes}}
	n := chunkCount(t.SizeBytes, opts)
	if n < 2 || t.Where != "" {
		return whole, nil
	}
	method := opts.Method
	if method == "" {
		method = Auto
	}
	if method == Auto || method == CTID {
		chunks, err := ctidChunks(ctx, conn, srv, t, n)
		if err != nil || chunks != nil {
			return chunks, err
		}
		if method == CTID {
			return nil, fmt.Errorf("split %s by ctid: the server does not read ctid ranges with a TID Range Scan (PostgreSQL 14 or later needed)", t.Qualified())
		}
	}
	chunks, maskedKey, err := keyChunks(ctx, conn, t, n, opts.Masked)
	if err != nil {
		return nil, err
	}
	if chunks == nil && maskedKey && method == Key {
		// --split-by key, but every key is masked: ctid ranges reveal
		// no value.
		if chunks, err = ctidChunks(ctx, conn, srv, t, n); err != nil {
			return nil, err
		}
	}
	if chunks == nil {
		return whole, nil // no integer key (or only masked ones): one worker reads it whole
	}
	return chunks, nil
}

// chunkCount is how many chunks a table of size bytes is cut into.
func chunkCount(size int64, opts Options) int {
	if opts.ChunkSize <= 0 || size <= opts.ChunkSize {
		return 1
	}
	n := (size + opts.ChunkSize - 1) / opts.ChunkSize
	n = max(n, int64(chunksPerJob*max(opts.Jobs, 1)))
	return int(min(n, maxChunks))
}

// SelectSQL is the query that reads one chunk: FROM ONLY, because a
// parent's rows never include its children's (each child is its own
// table). Generated columns are not in columns; with no columns at all
// the select list is empty and COPY writes one empty line per row.
func SelectSQL(schema, name string, columns []string, where string) string {
	q := fmt.Sprintf("SELECT %s FROM ONLY %s", pg.ColumnList(columns), pg.Qualified(schema, name))
	if where != "" {
		q += " WHERE " + where
	}
	return q
}
