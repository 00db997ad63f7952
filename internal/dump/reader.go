package dump

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// tablesPerTransaction is how many tables a reader locks in one
// transaction before it commits and imports the snapshot again, releasing
// their locks (the leader keeps its own): so that a dump of many tables
// needs about as many lock slots as pg_dump (the leader's), not that many
// again per reader. Importing costs two round trips.
const tablesPerTransaction = 50

// Reader is a connection in the session's snapshot that reads tables for a
// dump or a clone. Before a table's first COPY it takes the table's lock
// itself, without waiting (see Lock).
type Reader struct {
	conn   *pgx.Conn
	snap   string
	locked map[string]bool // tables locked by the current transaction
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
	return &Reader{conn: conn, snap: s.snap.ID, locked: map[string]bool{}}, nil
}

// Conn is the reader's connection.
func (r *Reader) Conn() *pgx.Conn { return r.conn }

// Lock takes t's ACCESS SHARE lock, as its COPY would, but with NOWAIT, as
// pg_dump -j's workers do: the leader already holds the lock, so the only
// thing that can be in the way is another session's request for ACCESS
// EXCLUSIVE (ALTER, TRUNCATE, DROP, LOCK), which waits for the leader; a
// COPY would queue behind it, and the run, the DDL and every query behind
// the DDL would wait forever. Lock returns a *pg.LockConflictError naming
// that session instead; the caller ends the run, which releases every lock.
// Every tablesPerTransaction tables, the reader first commits and imports
// the snapshot again, releasing the locks it took.
func (r *Reader) Lock(ctx context.Context, t archive.Table) error {
	name := pg.Qualified(t.Schema, t.Name)
	if r.locked[name] {
		return nil
	}
	if len(r.locked) >= tablesPerTransaction {
		if _, err := r.conn.Exec(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("release the locks of %d tables read: %w", len(r.locked), pg.ExplainLost(err))
		}
		if err := pg.ImportSnapshot(ctx, r.conn, r.snap); err != nil {
			return err
		}
		clear(r.locked)
	}
	if err := pg.LockNowait(ctx, r.conn, name); err != nil {
		return pg.ExplainLost(err)
	}
	r.locked[name] = true
	return nil
}

// IsClosed reports whether the connection was closed (pgx closes one whose
// COPY was interrupted).
func (r *Reader) IsClosed() bool { return r.conn.IsClosed() }

// Close closes the connection.
func (r *Reader) Close(ctx context.Context) { r.conn.Close(context.WithoutCancel(ctx)) }
