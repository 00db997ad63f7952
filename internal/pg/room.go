package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ConnectionRoom fails when the server behind conn cannot take need
// more connections for -j jobs: max_connections less the slots reserved
// for superusers (and, on PostgreSQL 16+, for pg_use_reserved_connections)
// that this role may not use, less the client connections open now; or
// when the role's or the database's CONNECTION LIMIT cannot. Asked
// before the workers connect, so that a -j the server cannot serve fails
// at once with the numbers, instead of half-way with "too many clients"
// (or, for a local socket, "resource temporarily unavailable").
// It returns the connections free, which preflight's checklist shows.
func ConnectionRoom(ctx context.Context, conn *pgx.Conn, jobs, need int) (int, error) {
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
		return 0, fmt.Errorf("read the server's connection limits: %w", err)
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
		return free, roleDatabaseRoom(ctx, conn, jobs, need)
	}
	cfg := conn.Config()
	return free, fmt.Errorf("-j %d needs %d more connections to %s:%d, but it accepts %d more now (max_connections %d, %d reserved, %d in use): lower -j",
		jobs, need, cfg.Host, cfg.Port, max(free, 0), maxConns, held, inUse)
}

// roleDatabaseRoom fails when conn's login role or database cannot take
// need more connections: their CONNECTION LIMIT (rolconnlimit,
// datconnlimit; -1 is none) less the connections of that role, or to that
// database, open now. The server enforces both on every connection but a
// superuser's, so a -j beyond them fails only when a worker connects,
// after the run created what it could.
func roleDatabaseRoom(ctx context.Context, conn *pgx.Conn, jobs, need int) error {
	var role, database string
	var super bool
	var roleLimit, roleOpen, dbLimit, dbOpen int
	err := conn.QueryRow(ctx, `SELECT r.rolname::text, r.rolsuper, r.rolconnlimit,
		(SELECT count(*) FROM pg_catalog.pg_stat_activity a WHERE a.usesysid = r.oid AND a.backend_type = 'client backend')::int,
		d.datname::text, d.datconnlimit,
		(SELECT count(*) FROM pg_catalog.pg_stat_activity a WHERE a.datid = d.oid AND a.backend_type = 'client backend')::int
		FROM pg_catalog.pg_roles r, pg_catalog.pg_database d
		WHERE r.rolname = session_user AND d.datname = pg_catalog.current_database()`).
		Scan(&role, &super, &roleLimit, &roleOpen, &database, &dbLimit, &dbOpen)
	if err != nil {
		return fmt.Errorf("read the role's and the database's connection limits: %w", err)
	}
	if super {
		return nil
	}
	if roleLimit >= 0 && roleOpen+need > roleLimit {
		return fmt.Errorf("-j %d needs %d more connections as role %s, but its CONNECTION LIMIT is %d and %d are open now: lower -j, or ALTER ROLE %s CONNECTION LIMIT %d",
			jobs, need, Ident(role), roleLimit, roleOpen, Ident(role), roleOpen+need)
	}
	if dbLimit >= 0 && dbOpen+need > dbLimit {
		return fmt.Errorf("-j %d needs %d more connections to database %s, but its CONNECTION LIMIT is %d and %d are open now: lower -j, or ALTER DATABASE %s CONNECTION LIMIT %d",
			jobs, need, Ident(database), dbLimit, dbOpen, Ident(database), dbOpen+need)
	}
	return nil
}
