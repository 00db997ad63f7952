package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// CheckConnectionRoom fails when the server behind conn cannot take need
// more connections for -j jobs: max_connections less the slots reserved
// for superusers (and, on PostgreSQL 16+, for pg_use_reserved_connections)
// that this role may not use, less the client connections open now. Asked
// before the workers connect, so that a -j the server cannot serve fails
// at once with the numbers, instead of half-way with "too many clients"
// (or, for a local socket, "resource temporarily unavailable").
func CheckConnectionRoom(ctx context.Context, conn *pgx.Conn, jobs, need int) error {
	var maxConns, superReserved, reserved, inUse int
	var super, useReserved bool
	err := conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int,
		coalesce(current_setting('reserved_connections', true), '0')::int,
		(SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend')::int,
		coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false),
		CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pg_use_reserved_connections')
			THEN pg_catalog.pg_has_role('pg_use_reserved_connections', 'MEMBER') ELSE false END`).
		Scan(&maxConns, &superReserved, &reserved, &inUse, &super, &useReserved)
	if err != nil {
		return fmt.Errorf("read the server's connection limits: %w", err)
	}
	free, held := maxConns-inUse, 0
	if !super {
		held += superReserved
		if !useReserved {
			held += reserved
		}
	}
	free -= held
	if need <= free {
		return nil
	}
	cfg := conn.Config()
	return fmt.Errorf("-j %d needs %d more connections to %s:%d, but it accepts %d more now (max_connections %d, %d reserved, %d in use): lower -j",
		jobs, need, cfg.Host, cfg.Port, max(free, 0), maxConns, held, inUse)
}
