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
func ListLargeObjects(ctx context.Context, conn *pgx.Conn) ([]LargeObjectInfo, error) {
	rows, err := conn.Query(ctx, `SELECT m.oid, pg_catalog.pg_get_userbyid(m.lomowner), m.lomacl IS NOT NULL,
		pg_catalog.obj_description(m.oid, 'pg_largeobject'),
		coalesce((SELECT array_agg(CASE WHEN a.grantee = 0 THEN '' ELSE pg_catalog.pg_get_userbyid(a.grantee) END
			ORDER BY a.grantee, a.privilege_type) FROM pg_catalog.aclexplode(m.lomacl) a), '{}'),
		coalesce((SELECT array_agg(a.privilege_type ORDER BY a.grantee, a.privilege_type)
			FROM pg_catalog.aclexplode(m.lomacl) a), '{}'),
		coalesce((SELECT array_agg(a.is_grantable ORDER BY a.grantee, a.privilege_type)
			FROM pg_catalog.aclexplode(m.lomacl) a), '{}')
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
	for off := int64(0); ; off += int64(size) {
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
