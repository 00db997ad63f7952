package dump

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Reader is a connection in the session's snapshot that reads tables for a
// dump or a clone. No one holds the tables' locks for the whole run (pg_dump
// --schema-only holds them only while it runs), so before a table's COPY
// the reader takes the table's lock itself, without waiting, and checks
// that the table is still the one the snapshot saw (see Lock). It holds
// only the locks of the tables it is reading: one table's, or a batch of
// small tables' (LockAll, at most MaxLockBatch); reading the next ones
// starts a new transaction in the same snapshot, which releases them.
type Reader struct {
	conn *pgx.Conn
	snap string
	inTx bool            // in a transaction in the snapshot
	held map[string]bool // the tables (quoted, qualified) locked by that transaction
	// masks is the session's: how masked tables' rows are rewritten.
	masks map[int]*mask.TableMask
	byID  bool // the connection has the settings of a chunk read by row id (see CopyTo)
	jit   bool // the server has the jit setting
}

// MaxLockBatch is the most tables LockAll locks at once: a batch of small
// tables is locked and checked in one round trip rather than one each, and
// 16 weak locks are what a backend holds without using the server's shared
// lock table (its fast-path slots).
const MaxLockBatch = 16

// OpenReader opens a connection that sees the session's snapshot, reads
// COPY data through a large buffer and in the encoding the manifest
// records. The caller closes it.
func (s *Session) OpenReader(ctx context.Context) (*Reader, error) {
	conn, err := pg.Connect(ctx, BulkReadConfig(s.source))
	if err != nil {
		return nil, err
	}
	if err := setCopyEncoding(ctx, conn, s.Manifest.Encoding); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := pg.ImportSnapshot(ctx, conn, s.snap.ID); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return &Reader{conn: conn, snap: s.snap.ID, inTx: true, masks: s.masks, jit: s.srv.HasJIT()}, nil
}

// Mask is how the rows of table (its index in the manifest's Tables) are
// masked as they are read, or nil when they are not.
func (r *Reader) Mask(table int) *mask.TableMask { return r.masks[table] }

// Conn is the reader's connection.
func (r *Reader) Conn() *pgx.Conn { return r.conn }

// CopyTo runs chunk c's COPY (CopyOutSQL; t is its table, enc the
// encoding of its data) into w.
//
// A subset's chunk names its rows by row id (Keep), so that a TID scan
// reads just them. The planner, costing each as a random read, would
// rather read the whole table, in parallel: fk-heavy's fk_t09, 4,214 rows
// of 200,000, took 108 ms by a parallel scan. So such chunks are read
// with no sequential scan (a TID scan, or a TID range scan by the chunk's
// page range, remains), no parallel workers (the dump's workers are its
// parallelism) and no JIT compilation (from PostgreSQL 11; a few ms of
// work each); the connection is back to the server's settings for other
// chunks.
func (r *Reader) CopyTo(ctx context.Context, w io.Writer, t archive.Table, c archive.Chunk, enc string) (pgconn.CommandTag, error) {
	if byID := c.Keep != ""; byID != r.byID {
		q := "SET enable_seqscan = off; SET max_parallel_workers_per_gather = 0"
		if r.jit {
			q += "; SET jit = off"
		}
		if !byID {
			q = "RESET enable_seqscan; RESET max_parallel_workers_per_gather"
			if r.jit {
				q += "; RESET jit"
			}
		}
		if _, err := r.conn.Exec(ctx, q); err != nil {
			return pgconn.CommandTag{}, fmt.Errorf("set up the planner: %w", err)
		}
		r.byID = byID
	}
	return r.conn.PgConn().CopyTo(ctx, w, CopyOutSQL(t, c, enc))
}

// Lock prepares t's COPY. It takes t's ACCESS SHARE lock, as the COPY
// would, but with NOWAIT, as pg_dump -j's workers do: a lock that is not
// granted at once is another session's ACCESS EXCLUSIVE (ALTER, TRUNCATE,
// DROP, LOCK, VACUUM FULL), held or awaited; a COPY queued behind it
// would hold up every query on the table behind itself. Lock returns a
// *pg.LockConflictError naming that session instead; the caller ends the
// run, which releases every lock.
//
// Once locked, the table can no longer change under the COPY, but it may
// have changed since the snapshot was taken, and some changes are not
// MVCC-safe: a TRUNCATE or a table rewrite (VACUUM FULL, CLUSTER, ALTER
// TABLE that rewrites, SET TABLESPACE) committed after the snapshot leaves
// the snapshot's rows unreadable (a TRUNCATEd table reads as empty, with no
// error). So Lock checks, in the same round trip, that the name still
// resolves to the snapshot's table (t.OID) and that its storage (its
// filenode in the current catalog, current once the lock is held) is the
// one the leader read in the snapshot (t.Filenode); otherwise it returns a
// *ChangedError.
//
// The lock is taken in a new transaction in the snapshot, unless the
// current one holds no table's lock yet or holds t's (chunks of one table
// in a row, or tables LockAll locked together): the previous tables' locks
// are released first.
func (r *Reader) Lock(ctx context.Context, t archive.Table) error {
	return r.LockAll(ctx, []archive.Table{t})
}

// LockAll is Lock for several tables (at most MaxLockBatch) in one round
// trip: one LOCK TABLE statement, NOWAIT, and one check query. A batch of
// small tables is then read in one transaction, each table's COPY after
// the other, and released together.
func (r *Reader) LockAll(ctx context.Context, ts []archive.Table) error {
	if len(ts) == 0 {
		return nil
	}
	if len(ts) > MaxLockBatch {
		return fmt.Errorf("lock %d tables at once: at most %d", len(ts), MaxLockBatch)
	}
	names := make([]string, len(ts))
	all := r.inTx
	for i, t := range ts {
		names[i] = pg.Qualified(t.Schema, t.Name)
		all = all && r.held[names[i]]
	}
	if all {
		return nil
	}
	var b strings.Builder
	if r.inTx && len(r.held) > 0 {
		b.WriteString("COMMIT; ")
		r.inTx, r.held = false, nil
	}
	if !r.inTx {
		fmt.Fprintf(&b, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT %s; ", pg.Literal(r.snap))
	}
	fmt.Fprintf(&b, "LOCK TABLE %s IN ACCESS SHARE MODE NOWAIT; ", strings.Join(names, ", "))
	// Archives and journals of earlier versions name neither OID nor
	// filenode: such tables are locked, not checked.
	var checked []int
	for i, t := range ts {
		if t.OID != 0 && t.Filenode != 0 {
			checked = append(checked, i)
		}
	}
	if len(checked) > 0 {
		// Both read the current catalog (no table scan: this costs
		// about as much as SELECT 1), one row per table, in order.
		b.WriteString("SELECT pg_catalog.pg_relation_filenode(t.oid), pg_catalog.to_regclass(t.name) IS NOT DISTINCT FROM t.oid FROM (VALUES ")
		for k, i := range checked {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "(%d, %d::pg_catalog.oid, %s)", k, ts[i].OID, pg.Literal(names[i]))
		}
		b.WriteString(") t(n, oid, name) ORDER BY t.n")
	}
	results, err := r.conn.PgConn().Exec(ctx, b.String()).ReadAll()
	if err != nil {
		return r.lockFailed(ctx, names, err)
	}
	r.inTx, r.held = true, make(map[string]bool, len(names))
	for _, n := range names {
		r.held[n] = true
	}
	if len(checked) == 0 {
		return nil
	}
	last := results[len(results)-1]
	if len(last.Rows) != len(checked) {
		return fmt.Errorf("check tables %s: unexpected answer", strings.Join(names, ", "))
	}
	for k, i := range checked {
		row := last.Rows[k]
		if len(row) != 2 {
			return fmt.Errorf("check table %s: unexpected answer", names[i])
		}
		node, sameName := row[0], string(row[1]) == "t"
		switch {
		case node == nil: // the name was locked: it is another table's
			return &ChangedError{Table: names[i], What: "dropped and created again"}
		case !sameName:
			return &ChangedError{Table: names[i], What: "renamed (another table has its name now)"}
		case string(node) != strconv.FormatUint(uint64(ts[i].Filenode), 10):
			return &ChangedError{Table: names[i], What: "truncated or rewritten"}
		}
	}
	return nil
}

// lockFailed explains why Lock's statements failed: another session's lock
// (named), the table gone, the snapshot gone, or the connection lost. The
// transaction is over or aborted either way; the run ends.
func (r *Reader) lockFailed(ctx context.Context, names []string, err error) error {
	name := strings.Join(names, ", ")
	if pg.IsLockNotAvailable(err) {
		r.inTx, r.held = false, nil
		if _, rerr := r.conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			return &pg.LockConflictError{Table: name}
		}
		return pg.Blocked(ctx, r.conn, names)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01": // undefined_table
			return &ChangedError{Table: strings.Join(names, " or "), What: "dropped or renamed"}
		case "22023": // invalid_parameter_value: "invalid snapshot identifier"
			return fmt.Errorf("import snapshot %s: %w (%s)", r.snap, pg.ErrSnapshotNotFound, pgErr.Message)
		}
	}
	return fmt.Errorf("lock table %s: %w", name, pg.ExplainLost(err))
}

// Release ends the reader's transaction, releasing the lock of the table it
// read, so that another session's DDL on that table need not wait for the
// reader's next table. The next Lock starts a new transaction in the
// snapshot.
func (r *Reader) Release(ctx context.Context) error {
	if !r.inTx || len(r.held) == 0 {
		return nil
	}
	r.inTx, r.held = false, nil
	if _, err := r.conn.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("release the lock of a table read: %w", pg.ExplainLost(err))
	}
	return nil
}

// InSnapshot makes sure the reader is in a transaction in the snapshot
// that holds no table lock, for a read that needs none (a large object's).
func (r *Reader) InSnapshot(ctx context.Context) error {
	if err := r.Release(ctx); err != nil {
		return err
	}
	if r.inTx {
		return nil
	}
	if err := pg.ImportSnapshot(ctx, r.conn, r.snap); err != nil {
		return err
	}
	r.inTx = true
	return nil
}

// IsClosed reports whether the connection was closed (pgx closes one whose
// COPY was interrupted).
func (r *Reader) IsClosed() bool { return r.conn.IsClosed() }

// Close closes the connection.
func (r *Reader) Close(ctx context.Context) { r.conn.Close(context.WithoutCancel(ctx)) }

// bulkReadSize is the read buffer of a dump connection. pgx reads 8 KiB at
// a time; COPY OUT sends one message per row, so a bigger buffer turns
// many small reads into one system call per socket buffer's worth.
const bulkReadSize = 256 << 10

// BulkReadConfig returns a copy of cfg whose connections read the socket
// through a bulkReadSize buffer, for connections that mostly receive COPY
// data. The raw-limit benchmark reads the same way, so that it measures
// the server and the wire rather than pgx's default buffer.
func BulkReadConfig(cfg *pgx.ConnConfig) *pgx.ConnConfig {
	cfg = cfg.Copy()
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, bulkReadSize), w)
	}
	return cfg
}

// setCopyEncoding keeps COPY bytes exactly as stored in a SQL_ASCII
// database, where a UTF8 client would be refused bytes that are not UTF8
// (pg.Connect does the same for every connection). Other encodings name
// theirs in COPY's ENCODING option (CopyOutSQL).
func setCopyEncoding(ctx context.Context, conn *pgx.Conn, enc string) error {
	if enc != "SQL_ASCII" {
		return nil
	}
	if _, err := conn.Exec(ctx, "SET client_encoding TO 'SQL_ASCII'"); err != nil {
		return fmt.Errorf("set client encoding: %w", err)
	}
	return nil
}

// CopyOutSQL is the statement that reads one chunk: a whole table by its
// column list, or a range through chunk.SelectSQL, the query the planner's
// tests EXPLAIN. Generated columns are left out (the target computes
// them), as pg_dump does. Text chunks are read in encoding enc (the
// source's own, which the manifest records: no conversion, and restore
// converts as pg_restore does); binary ones in the connection's
// client_encoding, which COPY's ENCODING option does not govern. The
// statement is pg.Copy's, the builder of the loading side too.
func CopyOutSQL(t archive.Table, c archive.Chunk, enc string) string {
	stmt := pg.Copy{Schema: t.Schema, Table: t.Name, Columns: t.Columns, Binary: c.Binary, Encoding: enc}
	switch {
	case c.Keep != "" && c.Where != "":
		stmt.Query = chunk.SelectSQL(t.Schema, t.Name, t.Columns, "("+c.Where+") AND "+c.Keep)
	case c.Keep != "":
		stmt.Query = chunk.SelectSQL(t.Schema, t.Name, t.Columns, c.Keep)
	case c.Where != "":
		stmt.Query = chunk.SelectSQL(t.Schema, t.Name, t.Columns, c.Where)
	}
	return stmt.To()
}

// ChangedError is a table that another session dropped, replaced, renamed,
// truncated or rewrote after the snapshot was taken and before its rows
// were read: the snapshot's rows can no longer be read (PostgreSQL's
// TRUNCATE and table rewrites are not MVCC-safe; the table would read as
// empty, without an error), so the run stops rather than copy the wrong
// rows.
type ChangedError struct {
	Table string // quoted, qualified
	What  string // "truncated or rewritten", "dropped", ...
}

// Error says which table, what happened and what to do, in one line.
func (e *ChangedError) Error() string {
	return fmt.Sprintf("table %s was %s by another session after the snapshot was taken, before its rows were read: stopped rather than copy wrong rows; run again", e.Table, e.What)
}
