package follow

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// LargeObjectSync says what finish did to the target's large objects,
// which logical replication does not carry.
type LargeObjectSync struct {
	// Created on the target with the source's OID; Changed (contents,
	// owner, privileges or comment) rewritten whole; Deleted from the
	// target, the source having none of that OID.
	Created, Changed, Deleted int
	// Source is how many large objects the source has.
	Source int
}

// String is finish's line about large objects.
func (s LargeObjectSync) String() string {
	return fmt.Sprintf("large objects: %d created, %d changed, %d deleted (the source has %d)", s.Created, s.Changed, s.Deleted, s.Source)
}

// loState is a large object's digest on one server: its metadata as
// text and its contents' size and md5, read with lo_get, which needs only
// SELECT on the object (as compare does), not superuser on pg_largeobject.
type loState struct {
	meta, content string
}

// loStates reads every large object's digest on conn, computed by its
// server: only digests cross the network.
func loStates(ctx context.Context, conn *pgx.Conn) (map[uint32]loState, error) {
	rows, err := conn.Query(ctx, `SELECT m.oid, pg_catalog.format('%s/%s/%s', pg_catalog.pg_get_userbyid(m.lomowner),
			coalesce(m.lomacl::text, '-'), coalesce(pg_catalog.quote_literal(pg_catalog.obj_description(m.oid, 'pg_largeobject')), '-')),
		pg_catalog.octet_length(d.d)::text || '/' || pg_catalog.md5(d.d)
		FROM pg_catalog.pg_largeobject_metadata m CROSS JOIN LATERAL pg_catalog.lo_get(m.oid) AS d(d)`)
	if err != nil {
		return nil, fmt.Errorf("read the large objects' digests: %w", err)
	}
	defer rows.Close()
	states := map[uint32]loState{}
	for rows.Next() {
		var oid uint32
		var s loState
		if err := rows.Scan(&oid, &s.meta, &s.content); err != nil {
			return nil, fmt.Errorf("read the large objects' digests: %w", err)
		}
		states[oid] = s
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the large objects' digests: %w", err)
	}
	return states, nil
}

// syncLargeObjects makes the target's large objects the source's, once
// the source takes no more writes: it compares digests computed on each
// server (both at once), creates the objects the target lacks with the
// same OIDs, rewrites those that differ in contents or metadata (unlink,
// then create again: a privilege list cannot be reset otherwise), and
// unlinks the target's objects the source has not, all in one target
// transaction: on error the target's large objects are as they were.
func syncLargeObjects(ctx context.Context, sconn, dconn *pgx.Conn) (LargeObjectSync, error) {
	var res LargeObjectSync
	var src, dst map[uint32]loState
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		src, err = loStates(gctx, sconn)
		if err != nil {
			err = fmt.Errorf("source: %w", err)
		}
		return err
	})
	g.Go(func() (err error) {
		dst, err = loStates(gctx, dconn)
		if err != nil {
			err = fmt.Errorf("target: %w", err)
		}
		return err
	})
	if err := g.Wait(); err != nil {
		return res, err
	}
	res.Source = len(src)
	var gone []uint32
	write := map[uint32]bool{} // OID: exists on the target
	for oid, s := range src {
		switch d, ok := dst[oid]; {
		case !ok:
			write[oid] = false
			res.Created++
		case d != s:
			write[oid] = true
			res.Changed++
		}
	}
	for oid := range dst {
		if _, ok := src[oid]; !ok {
			gone = append(gone, oid)
		}
	}
	res.Deleted = len(gone)
	if len(write) == 0 && len(gone) == 0 {
		return res, nil
	}
	var meta []pg.LargeObjectInfo
	if len(write) > 0 {
		all, err := pg.ListLargeObjects(ctx, sconn)
		if err != nil {
			return res, fmt.Errorf("source: %w", err)
		}
		for _, lo := range all {
			if _, ok := write[lo.OID]; ok {
				meta = append(meta, lo)
			}
		}
	}
	err := pgx.BeginFunc(ctx, dconn, func(tx pgx.Tx) error {
		if len(gone) > 0 {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_unlink(u) FROM pg_catalog.unnest($1::pg_catalog.oid[]) u", gone); err != nil {
				return fmt.Errorf("unlink the target's large objects the source has not: %w", err)
			}
		}
		for len(meta) > 0 {
			n := min(len(meta), loBatch)
			if err := copyLargeObjects(ctx, sconn, tx, meta[:n], write); err != nil {
				return err
			}
			meta = meta[n:]
		}
		return nil
	})
	return res, err
}

// loChunk is how much of a large object is read and written at a time;
// loBatch how many objects are read in one query and written in one
// round trip (their first loChunk bytes each, at most).
const (
	loChunk = 1 << 20
	loBatch = 32
)

// copyLargeObjects writes source large objects los into tx with their
// OIDs, contents, owners, privileges and comments (as restore gives
// them), unlinking first those whose OID exists[oid] says the target
// has. Their first loChunk bytes are read in one query and written in
// one batch, so that many small objects cost few round trips; the rest
// of a longer one follows loChunk bytes at a time.
func copyLargeObjects(ctx context.Context, sconn *pgx.Conn, tx pgx.Tx, los []pg.LargeObjectInfo, exists map[uint32]bool) error {
	oids := make([]uint32, len(los))
	for i, lo := range los {
		oids[i] = lo.OID
	}
	heads := make(map[uint32][]byte, len(los))
	if err := pg.ReadLargeObjectHeads(ctx, sconn, oids, loChunk, func(oid uint32, b []byte) error {
		if b == nil {
			b = []byte{} // an empty object: lo_from_bytea of NULL creates none
		}
		heads[oid] = b
		return nil
	}); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	var b pgx.Batch
	for _, lo := range los {
		if exists[lo.OID] {
			b.Queue("SELECT pg_catalog.lo_unlink($1)", lo.OID)
		}
		b.Queue("SELECT pg_catalog.lo_from_bytea($1, $2)", lo.OID, heads[lo.OID])
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("write large objects %d to %d on the target: %w", oids[0], oids[len(oids)-1], err)
	}
	for _, lo := range los {
		if len(heads[lo.OID]) < loChunk {
			continue
		}
		off := int64(loChunk)
		err := pg.ReadLargeObjectFrom(ctx, sconn, lo.OID, off, loChunk, func(b []byte) error {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_put($1, $2, $3)", lo.OID, off, b); err != nil {
				return err
			}
			off += int64(len(b))
			return nil
		})
		if err != nil {
			return fmt.Errorf("copy large object %d to the target: %w", lo.OID, err)
		}
	}
	// The owner last: writing needs UPDATE on the object, which the new
	// owner's privileges may not give this role.
	var m pgx.Batch
	for _, lo := range los {
		alo := archive.LargeObject{OID: lo.OID, Owner: lo.Owner, HasACL: lo.HasACL, Comment: lo.Comment}
		for _, g := range lo.Grants {
			alo.ACL = append(alo.ACL, archive.Grant{Grantee: g.Grantee, Privilege: g.Privilege, Grantable: g.Grantable})
		}
		for _, stmt := range restore.LargeObjectSQL(&alo, false, false) {
			m.Queue(stmt)
		}
	}
	if err := tx.SendBatch(ctx, &m).Close(); err != nil {
		return fmt.Errorf("set the owners, privileges and comments of large objects %d to %d on the target: %w", oids[0], oids[len(oids)-1], err)
	}
	return nil
}
