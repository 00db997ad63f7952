package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/subset"
)

// Volume is the size on disk of the tables whose rows a dump reads: their
// heaps, and their TOAST tables, where values too large for a page are
// kept (a table of large texts may be all TOAST and a few heap pages).
type Volume struct{ Heap, Toast int64 }

// Add is the volume of both.
func (v Volume) Add(w Volume) Volume { return Volume{v.Heap + w.Heap, v.Toast + w.Toast} }

// Archive is the size an archive of v is estimated at: compressed, the
// heaps shrink by compressionRatio while TOAST does not, its values being
// stored compressed already (pglz or lz4) when they compress at all.
// Indexes are not counted: an archive holds their definitions, not them.
func (v Volume) Archive(compressed bool) int64 {
	if compressed {
		return ArchiveEstimate(v.Heap, true) + v.Toast
	}
	return v.Heap + v.Toast
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
			jobs, need, pg.Ident(role), roleLimit, roleOpen, pg.Ident(role), roleOpen+need)
	}
	if dbLimit >= 0 && dbOpen+need > dbLimit {
		return fmt.Errorf("-j %d needs %d more connections to database %s, but its CONNECTION LIMIT is %d and %d are open now: lower -j, or ALTER DATABASE %s CONNECTION LIMIT %d",
			jobs, need, pg.Ident(database), dbLimit, dbOpen, pg.Ident(database), dbOpen+need)
	}
	return nil
}

// CanCreate refuses a target database that is read-only (a standby, or
// default_transaction_read_only), or where conn's role may not create
// what a restore or clone of m creates: the journal's schema and the
// archive's schemas need CREATE on the database; objects in a schema the
// target has already (public), CREATE on it. Without it pg_restore fails
// with "permission denied" at the first such object. dataOnly loads into
// tables that exist: only the journal's schema is created.
func CanCreate(ctx context.Context, conn *pgx.Conn, m *archive.Manifest, dataOnly bool) error {
	var database, role string
	var onDB, readOnly, standby bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.current_database()::text, current_user::text,
		pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),
		pg_catalog.current_setting('transaction_read_only')::bool, pg_catalog.pg_is_in_recovery()`).Scan(&database, &role, &onDB, &readOnly, &standby); err != nil {
		return fmt.Errorf("read the privileges on the target database: %w", err)
	}
	switch {
	case standby:
		return fmt.Errorf("the target database %s is on a standby, which is read-only: restore into its primary", pg.Ident(database))
	case readOnly:
		return fmt.Errorf("the target database %s is read-only (default_transaction_read_only is on for it or for role %s): ALTER DATABASE %s SET default_transaction_read_only = off, or restore elsewhere",
			pg.Ident(database), pg.Ident(role), pg.Ident(database))
	case !onDB:
		return fmt.Errorf("role %s has no CREATE privilege on the target database %s (for pgsprint's journal and the archive's schemas): GRANT CREATE ON DATABASE %s TO %s, or restore as its owner",
			pg.Ident(role), pg.Ident(database), pg.Ident(database), pg.Ident(role))
	}
	if dataOnly || m == nil {
		return nil
	}
	seen := map[string]bool{}
	var schemas []string
	for _, t := range m.Tables {
		if !seen[t.Schema] {
			seen[t.Schema] = true
			schemas = append(schemas, t.Schema)
		}
	}
	for _, o := range m.Relations {
		if !seen[o.Schema] {
			seen[o.Schema] = true
			schemas = append(schemas, o.Schema)
		}
	}
	var denied []string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(n.nspname::text ORDER BY n.nspname), '{}')
		FROM pg_catalog.pg_namespace n WHERE n.nspname = ANY($1) AND NOT pg_catalog.has_schema_privilege(n.oid, 'CREATE')`, schemas).Scan(&denied); err != nil {
		return fmt.Errorf("read the privileges on the target's schemas: %w", err)
	}
	if len(denied) > 0 {
		quoted := make([]string, len(denied))
		for i, s := range denied {
			quoted[i] = pg.Ident(s)
		}
		return fmt.Errorf("role %s has no CREATE privilege on schema %s of the target database %s, where the archive creates objects: GRANT CREATE ON SCHEMA %s TO %s, or restore as its owner",
			pg.Ident(role), strings.Join(quoted, ", "), pg.Ident(database), strings.Join(quoted, ", "), pg.Ident(role))
	}
	return nil
}

// privileges adds the check of CanCreate on the target.
func (c *Checklist) privileges(ctx context.Context, conn *pgx.Conn, m *archive.Manifest, dataOnly bool) {
	c.add(check("target privileges", CanCreate(ctx, conn, m, dataOnly), "CREATE on the target database and on its schemas the archive uses"))
}

// rules adds the checks of --subset's and --mask's rules against the
// source, by the functions the run calls (subset.Compute, mask.Resolve),
// in a read-only transaction rolled back after: an unknown table or
// column, a condition that does not parse, a masked key are refused here
// as the run refuses them. A rule naming what the source lacks is a
// usage error, as the run's (Checklist.Usage).
func (c *Checklist) rules(ctx context.Context, conn *pgx.Conn, srv pg.Server, sub subset.Spec, mk mask.Spec) {
	if !sub.Active() && !mk.Active() {
		return
	}
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		c.add(fail("rules", err))
		return
	}
	defer conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	if sub.Active() {
		_, err := subset.Compute(ctx, conn, sub, subset.Options{Server: srv})
		var re *subset.RefusedError
		if errors.As(err, &re) {
			c.Usage = AsUsage(err)
		}
		c.add(check("subset", err, fmt.Sprintf("%d rules: their tables, columns and conditions are the source's", len(sub.Seeds)+len(sub.Refs))))
		if err != nil {
			return // the transaction may be aborted
		}
	}
	if mk.Active() {
		_, err := mask.Resolve(ctx, conn, mk, srv.Encoding)
		var re *mask.RefusedError
		if errors.As(err, &re) {
			c.Usage = AsUsage(err)
		}
		c.add(check("mask", err, fmt.Sprintf("%d rules fit the source's columns and keys", len(mk.Rules))))
	}
}
