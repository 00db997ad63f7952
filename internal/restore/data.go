package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// connectWorker opens a worker connection with settings that need no
// server change. synchronous_commit=off is safe here: a crash mid-restore
// means restoring again anyway. maintenance_work_mem is what index builds
// sort in; parallel maintenance workers let one large index build use the
// cores that other work leaves idle.
func (r *run) connectWorker(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return nil, err
	}
	setup := "SET synchronous_commit TO off"
	if r.opts.MaintenanceWorkMem != "" {
		setup += "; SET maintenance_work_mem TO " + pg.Literal(r.opts.MaintenanceWorkMem)
	}
	setup += fmt.Sprintf("; SET max_parallel_maintenance_workers TO %d", min(max(r.opts.Jobs-1, 1), 8))
	if r.opts.DisableTriggers {
		// Triggers and foreign key checks off for the loads, as
		// pg_restore --disable-triggers; the server allows it to
		// superusers only, and says so.
		setup += "; SET session_replication_role TO replica"
	}
	if _, err := conn.Exec(ctx, setup); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("set up restore session: %w", err)
	}
	return conn, nil
}

func (r *run) tableName(c *archive.Chunk) string {
	t := r.m.Tables[c.Table]
	return pg.Qualified(t.Schema, t.Name)
}

// CopyInSQL is the statement that loads one chunk, before its options.
func CopyInSQL(t archive.Table) string {
	return fmt.Sprintf("COPY %s%s FROM STDIN", pg.Qualified(t.Schema, t.Name), pg.CopyColumns(t.Columns))
}

// EncodingOption is COPY's option for text data in the archive's encoding
// enc (the source's server encoding): the server converts it into its
// own, as it does for pg_restore, which sets client_encoding instead.
// Empty when the archive names no encoding.
func EncodingOption(enc string) string {
	if enc == "" {
		return ""
	}
	return "ENCODING " + pg.Literal(enc)
}

// load is the payload of a data task.
type load struct {
	chunk  *archive.Chunk
	lo     *archive.LargeObject
	freeze bool       // the table's only chunk: TRUNCATE + COPY FREEZE
	split  *splitLoad // one of several connections sharing the chunk
}

// chunkStep is the journal step of loading one stream (a chunk or a large
// object): stream numbers are fixed by the archive.
func chunkStep(stream uint32) string { return fmt.Sprintf("load stream %d", stream) }

// loadChunk streams one chunk's blocks, checked and decompressed, into COPY,
// in one transaction that also records the chunk in the journal: it commits
// with every row and its journal row, or not at all. The row count the
// server reports must equal the one the dump recorded before it commits.
//
// With freeze, the table was created by this restore and this is its only
// chunk: TRUNCATE in the same transaction lets COPY FREEZE write rows
// already frozen and visible to all, so nothing has to set hint bits or
// freeze them later (and it wipes whatever an interrupted run left). If
// TRUNCATE is not allowed (the table belongs to another role), it loads as
// usual.
func (r *run) loadChunk(ctx context.Context, conn *pgx.Conn, c *archive.Chunk, freeze bool) (int64, error) {
	name := r.tableName(c)
	s := r.ar.OpenStream(c.Stream)
	defer s.Close()
	copySQL := CopyInSQL(r.m.Tables[c.Table])
	var with []string
	if c.Binary {
		with = append(with, "FORMAT binary")
	} else if opt := EncodingOption(r.m.DataEncoding()); opt != "" {
		with = append(with, opt)
	}
	check := func(n int64) error { return r.checkRows(c, n) }
	n, err := r.copyInTx(ctx, conn, name, copySQL, with, s, check, freeze, chunkStep(c.Stream))
	if err == errNoFreeze {
		n, err = r.copyInTx(ctx, conn, name, copySQL, with, s, check, false, chunkStep(c.Stream))
	}
	if err != nil {
		return 0, fmt.Errorf("restore table %s (stream %d): %w", name, c.Stream, pg.ExplainLost(err))
	}
	return n, nil
}

// errNoFreeze says TRUNCATE was refused, so COPY FREEZE cannot be used.
var errNoFreeze = errors.New("no privilege to truncate")

// copyInTx runs [TRUNCATE +] COPY + journal row in one transaction, with
// COPY's options with (FREEZE is added when freezing). check
// sees the loaded row count before COMMIT: it is called only after the
// stream has been read to its end, when a pipe's totals are known too.
func (r *run) copyInTx(ctx context.Context, conn *pgx.Conn, name, copySQL string, with []string, s io.Reader, check func(int64) error, freeze bool, step string) (int64, error) {
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if freeze {
		if _, err := conn.Exec(ctx, "TRUNCATE ONLY "+name); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42501" {
				return 0, errNoFreeze
			}
			return 0, err
		}
		with = append(with, "FREEZE")
	}
	if len(with) > 0 {
		copySQL += " WITH (" + strings.Join(with, ", ") + ")"
	}
	tag, err := conn.PgConn().CopyFrom(ctx, s, copySQL)
	if err != nil {
		return 0, err
	}
	if err := check(tag.RowsAffected()); err != nil {
		return 0, err
	}
	if err := r.j.record(ctx, conn, step); err != nil {
		return 0, err
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		return 0, err
	}
	done = true
	return tag.RowsAffected(), nil
}

// loadLargeObject recreates one large object with its OID, contents, owner,
// privileges and comment, in one transaction with its journal row.
func (r *run) loadLargeObject(ctx context.Context, conn *pgx.Conn, lo *archive.LargeObject) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if err := r.j.record(ctx, tx, chunkStep(lo.Stream)); err != nil {
			return err
		}
		if r.opts.Clean {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_unlink(oid) FROM pg_catalog.pg_largeobject_metadata WHERE oid = $1", lo.OID); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_create($1)", lo.OID); err != nil {
			return err
		}
		s := r.ar.OpenStream(lo.Stream)
		defer s.Close()
		buf := make([]byte, 1<<20)
		var off int64
		for {
			n, err := io.ReadFull(s, buf)
			if n > 0 {
				if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_put($1, $2, $3)", lo.OID, off, buf[:n]); err != nil {
					return err
				}
				off += int64(n)
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return err
			}
		}
		for _, stmt := range largeObjectMetadata(lo, r.opts.NoOwner, r.opts.NoACL) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("restore large object %d: %w", lo.OID, err)
	}
	return nil
}

// largeObjectMetadata returns the statements pg_dump would emit for a large
// object's owner, privileges and comment.
func largeObjectMetadata(lo *archive.LargeObject, noOwner, noACL bool) []string {
	obj := fmt.Sprintf("LARGE OBJECT %d", lo.OID)
	var stmts []string
	if !noOwner && lo.Owner != "" {
		stmts = append(stmts, fmt.Sprintf("ALTER %s OWNER TO %s", obj, pg.Ident(lo.Owner)))
	}
	if !noACL && lo.HasACL {
		stmts = append(stmts, fmt.Sprintf("REVOKE ALL ON %s FROM PUBLIC", obj))
		if lo.Owner != "" {
			stmts = append(stmts, fmt.Sprintf("REVOKE ALL ON %s FROM %s", obj, pg.Ident(lo.Owner)))
		}
		for _, g := range lo.ACL {
			if g.Privilege != "SELECT" && g.Privilege != "UPDATE" {
				// Large objects have no other privileges; anything else is a
				// damaged or forged archive, and must not reach SQL text.
				continue
			}
			to := "PUBLIC"
			if g.Grantee != "" {
				to = pg.Ident(g.Grantee)
			}
			stmt := fmt.Sprintf("GRANT %s ON %s TO %s", g.Privilege, obj, to)
			if g.Grantable {
				stmt += " WITH GRANT OPTION"
			}
			stmts = append(stmts, stmt)
		}
	}
	if lo.Comment != nil {
		stmts = append(stmts, fmt.Sprintf("COMMENT ON %s IS %s", obj, pg.Literal(*lo.Comment)))
	}
	return stmts
}
