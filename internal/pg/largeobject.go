package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// LargeObjectInfo is a large object's metadata. pg_dump --schema-only omits
// large objects altogether, metadata included, so pgsprint carries it.
type LargeObjectInfo struct {
	OID     uint32
	Owner   string
	HasACL  bool
	Grants  []LargeObjectGrant
	Comment *string
}

// LargeObjectGrant is one privilege of a large object.
type LargeObjectGrant struct {
	Grantee   string // empty for PUBLIC
	Privilege string // SELECT or UPDATE
	Grantable bool
}

// ListLargeObjects reads every large object's metadata in the snapshot.
// Grants come in the order of the object's ACL, so that granting them in
// that order rebuilds the same aclitem array.
func ListLargeObjects(ctx context.Context, conn *pgx.Conn) ([]LargeObjectInfo, error) {
	rows, err := conn.Query(ctx, `SELECT m.oid, pg_catalog.pg_get_userbyid(m.lomowner), m.lomacl IS NOT NULL,
		pg_catalog.obj_description(m.oid, 'pg_largeobject'),
		coalesce((SELECT array_agg(CASE WHEN a.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(a.grantee) END
			ORDER BY a.n) FROM pg_catalog.aclexplode(m.lomacl) WITH ORDINALITY a(grantor, grantee, privilege_type, is_grantable, n)), '{}'),
		coalesce((SELECT array_agg(a.privilege_type ORDER BY a.n)
			FROM pg_catalog.aclexplode(m.lomacl) WITH ORDINALITY a(grantor, grantee, privilege_type, is_grantable, n)), '{}'),
		coalesce((SELECT array_agg(a.is_grantable ORDER BY a.n)
			FROM pg_catalog.aclexplode(m.lomacl) WITH ORDINALITY a(grantor, grantee, privilege_type, is_grantable, n)), '{}')
	FROM pg_catalog.pg_largeobject_metadata m ORDER BY m.oid`)
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	los, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LargeObjectInfo, error) {
		var lo LargeObjectInfo
		var grantees, privs []string
		var grantable []bool
		if err := r.Scan(&lo.OID, &lo.Owner, &lo.HasACL, &lo.Comment, &grantees, &privs, &grantable); err != nil {
			return lo, err
		}
		for i := range grantees {
			lo.Grants = append(lo.Grants, LargeObjectGrant{Grantee: grantees[i], Privilege: privs[i], Grantable: grantable[i]})
		}
		return lo, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	return los, nil
}

// ReadLargeObject calls fn with successive pieces of at most size bytes of a
// large object, read in the connection's snapshot.
func ReadLargeObject(ctx context.Context, conn *pgx.Conn, oid uint32, size int, fn func([]byte) error) error {
	return ReadLargeObjectFrom(ctx, conn, oid, 0, size, fn)
}

// ReadLargeObjectFrom is ReadLargeObject from byte offset start on.
func ReadLargeObjectFrom(ctx context.Context, conn *pgx.Conn, oid uint32, start int64, size int, fn func([]byte) error) error {
	for off := start; ; off += int64(size) {
		var buf []byte
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.lo_get($1, $2, $3)", oid, off, size).Scan(&buf); err != nil {
			return fmt.Errorf("read large object %d: %w", oid, err)
		}
		if len(buf) > 0 {
			if err := fn(buf); err != nil {
				return err
			}
		}
		if len(buf) < size {
			return nil
		}
	}
}

// ReadLargeObjectHeads calls fn with the first head bytes (fewer if it is
// shorter) of each large object in oids, in order, read in the
// connection's snapshot with one query for all: the many small large
// objects of a database then cost one round trip together instead of one
// each. An object whose head is head bytes long may have more, for
// ReadLargeObjectFrom. fn may keep b.
func ReadLargeObjectHeads(ctx context.Context, conn *pgx.Conn, oids []uint32, head int, fn func(oid uint32, b []byte) error) error {
	rows, err := conn.Query(ctx, "SELECT u.oid, pg_catalog.lo_get(u.oid, 0, $2) FROM pg_catalog.unnest($1::pg_catalog.oid[]) WITH ORDINALITY u(oid, i) ORDER BY u.i", oids, head)
	if err != nil {
		return fmt.Errorf("read large objects: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var oid uint32
		var b []byte
		if err := rows.Scan(&oid, &b); err != nil {
			return fmt.Errorf("read large object: %w", err)
		}
		if err := fn(oid, b); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read large objects: %w", err)
	}
	return nil
}
