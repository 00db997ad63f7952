package dump

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Reader is a connection in the session's snapshot that reads tables for a
// dump or a clone. No one holds the tables' locks for the whole run (pg_dump
// --schema-only holds them only while it runs), so before a table's COPY
// the reader takes the table's lock itself, without waiting, and checks
// that the table is still the one the snapshot saw (see Lock). It holds at
// most that one table's lock: reading the next table starts a new
// transaction in the same snapshot, which releases it.
type Reader struct {
	conn *pgx.Conn
	snap string
	inTx bool   // in a transaction in the snapshot
	held string // the table (quoted, qualified) locked by that transaction, if any
}

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
	return &Reader{conn: conn, snap: s.snap.ID, inTx: true}, nil
}

// Conn is the reader's connection.
func (r *Reader) Conn() *pgx.Conn { return r.conn }

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
// in a row): the previous table's lock is released first.
func (r *Reader) Lock(ctx context.Context, t archive.Table) error {
	name := pg.Qualified(t.Schema, t.Name)
	if r.inTx && r.held == name {
		return nil
	}
	var b strings.Builder
	if r.inTx && r.held != "" {
		b.WriteString("COMMIT; ")
		r.inTx, r.held = false, ""
	}
	if !r.inTx {
		fmt.Fprintf(&b, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT %s; ", pg.Literal(r.snap))
	}
	fmt.Fprintf(&b, "LOCK TABLE %s IN ACCESS SHARE MODE NOWAIT; ", name)
	check := t.OID != 0 && t.Filenode != 0 // archives and journals of earlier versions name neither
	if check {
		// Both read the current catalog (no table scan: this costs
		// about as much as SELECT 1).
		fmt.Fprintf(&b, `SELECT pg_catalog.pg_relation_filenode(%d), pg_catalog.to_regclass(%s) IS NOT DISTINCT FROM %d::pg_catalog.oid`,
			t.OID, pg.Literal(name), t.OID)
	}
	results, err := r.conn.PgConn().Exec(ctx, b.String()).ReadAll()
	if err != nil {
		return r.lockFailed(ctx, name, err)
	}
	r.inTx, r.held = true, name
	if !check {
		return nil
	}
	last := results[len(results)-1]
	if len(last.Rows) != 1 || len(last.Rows[0]) != 2 {
		return fmt.Errorf("check table %s: unexpected answer", name)
	}
	node, sameName := last.Rows[0][0], string(last.Rows[0][1]) == "t"
	switch {
	case node == nil: // the name was locked: it is another table's
		return &ChangedError{Table: name, What: "dropped and created again"}
	case !sameName:
		return &ChangedError{Table: name, What: "renamed (another table has its name now)"}
	case string(node) != strconv.FormatUint(uint64(t.Filenode), 10):
		return &ChangedError{Table: name, What: "truncated or rewritten"}
	}
	return nil
}

// lockFailed explains why Lock's statements failed: another session's lock
// (named), the table gone, the snapshot gone, or the connection lost. The
// transaction is over or aborted either way; the run ends.
func (r *Reader) lockFailed(ctx context.Context, name string, err error) error {
	if pg.IsLockNotAvailable(err) {
		r.inTx, r.held = false, ""
		if _, rerr := r.conn.Exec(ctx, "ROLLBACK"); rerr != nil {
			return &pg.LockConflictError{Table: name}
		}
		return pg.Blocked(ctx, r.conn, []string{name})
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "42P01": // undefined_table
			return &ChangedError{Table: name, What: "dropped or renamed"}
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
	if !r.inTx || r.held == "" {
		return nil
	}
	r.inTx, r.held = false, ""
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
