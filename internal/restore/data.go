package restore

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// unit is one piece of data to load: a chunk of a table or a large object.
type unit struct {
	chunk *archive.Chunk
	lo    *archive.LargeObject
	size  int64
}

// loadData loads every chunk and large object on opts.Jobs connections,
// largest first.
func (r *run) loadData(ctx context.Context) error {
	var units []unit
	for i := range r.m.Chunks {
		c := &r.m.Chunks[i]
		info, ok := r.ar.Stream(c.Stream)
		if !ok {
			return fmt.Errorf("archive has no data for table %s", r.tableName(c))
		}
		units = append(units, unit{chunk: c, size: info.RawBytes})
	}
	for i := range r.m.LargeObjects {
		lo := &r.m.LargeObjects[i]
		info, ok := r.ar.Stream(lo.Stream)
		if !ok {
			return fmt.Errorf("archive has no data for large object %d", lo.OID)
		}
		units = append(units, unit{lo: lo, size: info.RawBytes})
	}
	sort.SliceStable(units, func(i, j int) bool { return units[i].size > units[j].size })

	var rows atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	work := make(chan unit)
	g.Go(func() error {
		defer close(work)
		for _, u := range units {
			select {
			case work <- u:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range r.opts.Jobs {
		g.Go(func() error {
			conn, err := r.connectWorker(gctx)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(gctx))
			for u := range work {
				if u.chunk != nil {
					n, err := r.loadChunk(gctx, conn, u.chunk)
					if err != nil {
						return err
					}
					rows.Add(n)
				} else if err := r.loadLargeObject(gctx, conn, u.lo); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("restore interrupted: %w", context.Cause(ctx))
		}
		return err
	}
	r.res.Rows = rows.Load()
	return nil
}

// connectWorker opens a loading connection. synchronous_commit=off is safe
// here: a crash mid-restore means restoring again anyway.
func (r *run) connectWorker(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return nil, err
	}
	setup := "SET synchronous_commit TO off"
	if r.m.Encoding == "SQL_ASCII" {
		setup += "; SET client_encoding TO 'SQL_ASCII'"
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

// CopyInSQL is the statement that loads one chunk.
func CopyInSQL(t archive.Table) string {
	return fmt.Sprintf("COPY %s%s FROM STDIN", pg.Qualified(t.Schema, t.Name), pg.CopyColumns(t.Columns))
}

// loadChunk streams one chunk's blocks, checked and decompressed, into COPY.
// The row count the server reports must equal the one the dump recorded.
func (r *run) loadChunk(ctx context.Context, conn *pgx.Conn, c *archive.Chunk) (int64, error) {
	name := r.tableName(c)
	s := r.ar.OpenStream(c.Stream)
	defer s.Close()
	tag, err := conn.PgConn().CopyFrom(ctx, s, CopyInSQL(r.m.Tables[c.Table]))
	if err != nil {
		return 0, fmt.Errorf("restore table %s (stream %d): %w", name, c.Stream, pg.ExplainLost(err))
	}
	info, _ := r.ar.Stream(c.Stream)
	if tag.RowsAffected() != info.Rows {
		return 0, fmt.Errorf("restore table %s: loaded %d rows, archive holds %d", name, tag.RowsAffected(), info.Rows)
	}
	return tag.RowsAffected(), nil
}

// loadLargeObject recreates one large object with its OID, contents, owner,
// privileges and comment, in one transaction.
func (r *run) loadLargeObject(ctx context.Context, conn *pgx.Conn, lo *archive.LargeObject) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
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
