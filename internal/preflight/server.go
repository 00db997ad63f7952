package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// ConnectionRoom fails when the server behind conn cannot take need
// more connections for -j jobs: max_connections less the slots reserved
// for superusers (and, on PostgreSQL 16+, for pg_use_reserved_connections)
// that this role may not use, less the client connections open now; or
// when the role's or the database's CONNECTION LIMIT cannot. Asked
// before the workers connect, so that a -j the server cannot serve fails
// at once with the numbers, instead of half-way with "too many clients"
// (or, for a local socket, "resource temporarily unavailable").
func ConnectionRoom(ctx context.Context, conn *pgx.Conn, jobs, need int) error {
	_, err := connectionRoom(ctx, conn, jobs, need)
	return err
}

// connectionRoom is ConnectionRoom, with the connections free when it
// passes (for the checklist).
func connectionRoom(ctx context.Context, conn *pgx.Conn, jobs, need int) (int, error) {
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

// LockTable is a server's shared lock table, as its settings size it.
type LockTable struct {
	// Documented is its size as PostgreSQL's documentation gives it,
	// max_locks_per_transaction * (max_connections +
	// max_prepared_transactions): what dump.LockBudget shares out.
	Documented int64
	// Entries is the size the server allocates: the documented formula
	// counts only client connections, the server counts every backend
	// (autovacuum workers, background workers, WAL senders).
	Entries int64
	// Held is the locks held in the shared table now (fast-path locks,
	// kept in each backend, take no slot).
	Held    int64
	perXact int64
}

// ReadLockTable reads the lock table's size and the locks held in it.
func ReadLockTable(ctx context.Context, conn *pgx.Conn) (LockTable, error) {
	var t LockTable
	var backends, prepared int64
	err := conn.QueryRow(ctx, `SELECT current_setting('max_locks_per_transaction')::bigint,
		current_setting('max_connections')::bigint,
		current_setting('max_prepared_transactions')::bigint,
		current_setting('max_connections')::bigint + current_setting('autovacuum_max_workers')::bigint + 1
			+ current_setting('max_worker_processes')::bigint + current_setting('max_wal_senders')::bigint,
		(SELECT count(*) FROM pg_catalog.pg_locks WHERE NOT fastpath)`).Scan(&t.perXact, &t.Documented, &prepared, &backends, &t.Held)
	if err != nil {
		return t, fmt.Errorf("read the size of the server's lock table: %w", err)
	}
	t.Documented = t.perXact * (t.Documented + prepared)
	t.Entries = t.perXact * (backends + prepared)
	return t, nil
}

// lockSlack is how far beyond its allocated entries a lock table was seen
// to grow into the shared memory's spare space before "out of shared
// memory" (1.7 to 1.9 times, in TestManyTablesFewLockSlots and
// TestAllWithinLockTable): a run needing more than this many times the
// entries cannot succeed; one between the entries and this may.
const lockSlack = 2

// LockSlots fails when a pg_dump locking tables tables (plus the catalogs
// it reads) cannot fit in the server's lock table beside the locks held
// now: "out of shared memory" after the whole schema was read. It passes
// with a warning (ok, detail) when the locks exceed the allocated entries
// but may fit in the shared memory's slack.
func LockSlots(ctx context.Context, conn *pgx.Conn, tables int64) (warning bool, detail string, err error) {
	t, err := ReadLockTable(ctx, conn)
	if err != nil {
		return false, "", err
	}
	need := tables + PgDumpOverhead
	free := t.Entries - t.Held
	detail = fmt.Sprintf("pg_dump locks %d tables (+%d for catalogs); the lock table has %d entries (max_locks_per_transaction %d), %d held now",
		tables, PgDumpOverhead, t.Entries, t.perXact, t.Held)
	switch {
	case need > lockSlack*t.Entries-t.Held:
		want := (need + t.Held + t.Entries/t.perXact - 1) / (t.Entries / t.perXact)
		return false, "", fmt.Errorf("%s: pg_dump would fail with \"out of shared memory\": raise max_locks_per_transaction to at least %d on the source (restart), or dump fewer tables at once (-n/-t)", detail, want)
	case need > free:
		return true, detail + ": beyond the entries, within the shared memory's slack, so pg_dump may still fail with \"out of shared memory\" (raise max_locks_per_transaction to be sure)", nil
	}
	return false, detail, nil
}

// PgDumpOverhead is the locks a pg_dump holds besides its tables': the
// catalog tables and indexes its queries read, locked until its
// transaction ends.
const PgDumpOverhead = 100

// TablesToLock counts the tables a pg_dump of conn's database would lock:
// every table and partitioned table outside the system schemas, whatever
// the filter selects, so never fewer than pg_dump locks.
func TablesToLock(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the tables pg_dump will lock: %w", err)
	}
	return n, nil
}

// Empty refuses a target database that already holds anything someone
// created (pg.UserObjects: tables, sequences, types, functions, schemas
// but public, extensions but plpgsql, large objects...), naming the first
// objects: loading on top of existing rows would duplicate or mix data,
// pg_restore would fail half-way on an object that already exists, and a
// resume must be able to tell that every archived object in the target is
// its own.
func Empty(ctx context.Context, conn *pgx.Conn, database string) error {
	n, found, err := pg.UserObjects(ctx, conn, 5)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	list := strings.Join(found, ", ")
	if n > len(found) {
		list += fmt.Sprintf(" and %d more", n-len(found))
	}
	return fmt.Errorf("target database %q is not empty: it holds %s; restore into an empty database or use --clean", database, list)
}

// Encoding refuses, before anything is created, a target whose encoding
// cannot hold the names of m (an archive's manifest, or what a clone
// reads), naming the first table that does not fit. A target of m's own
// encoding, a UTF8 target (any encoding but SQL_ASCII converts into it)
// and a SQL_ASCII target (which stores any bytes) always can. Values are
// converted by the server as they load; one that does not fit fails its
// table, as it would with pg_restore.
func Encoding(ctx context.Context, conn *pgx.Conn, m *archive.Manifest) error {
	from, to := m.Encoding, conn.PgConn().ParameterStatus("server_encoding")
	if from == "" || from == to || to == "SQL_ASCII" || (to == "UTF8" && from != "SQL_ASCII") {
		return nil
	}
	// The connection sends the manifest's names in UTF8, or a SQL_ASCII
	// archive's bytes as SQL_ASCII, as pg_restore would: the server
	// converts (or checks) each into its own encoding, or says it cannot.
	if from == "SQL_ASCII" {
		if _, err := conn.Exec(ctx, "SET client_encoding TO 'SQL_ASCII'"); err != nil {
			return err
		}
		defer conn.Exec(context.WithoutCancel(ctx), "SET client_encoding TO 'UTF8'")
	}
	fits := func(names []string) error {
		_, err := conn.Exec(ctx, "SELECT $1::text[]", names)
		return err
	}
	var all []string
	for _, t := range m.Tables {
		all = append(append(all, t.Schema, t.Name), t.Columns...)
	}
	for _, o := range m.Relations {
		all = append(all, o.Schema, o.Name)
	}
	for _, o := range m.Schemas {
		all = append(all, o.Name)
	}
	err := fits(all)
	if err == nil || !IsEncodingError(err) {
		return err
	}
	what := "names"
	for _, t := range m.Tables {
		if terr := fits(append([]string{t.Schema, t.Name}, t.Columns...)); terr != nil {
			what, err = "table "+pg.Qualified(t.Schema, t.Name), terr
			break
		}
	}
	return EncodingError{fmt.Errorf("%s of this %s archive cannot be restored into a %s database (restore into a %s database): %w", what, from, to, WideEnough(from), err)}
}

// EncodingError is Encoding's refusal, which explains itself.
type EncodingError struct{ error }

// Unwrap gives the server's error.
func (e EncodingError) Unwrap() error { return e.error }

// WideEnough names the encodings that hold all of text in enc.
func WideEnough(enc string) string {
	if enc == "UTF8" || enc == "SQL_ASCII" {
		return enc
	}
	return enc + " or UTF8"
}

// IsEncodingError reports whether err is the server's refusal of text its
// encoding cannot hold (untranslatable_character, or
// character_not_in_repertoire for bytes invalid in it), from pgx or in
// a client program's words.
func IsEncodingError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "22P05" || pgErr.Code == "22021"
	}
	msg := err.Error()
	return strings.Contains(msg, "has no equivalent in encoding") || strings.Contains(msg, "invalid byte sequence for encoding")
}

// RestoreTools picks pg_restore and psql at least as new as both the
// pg_dump that wrote m's schema (older ones cannot read its format) and
// the target server (pg_restore must understand the server it talks to,
// as for pg_dump; restoring an old dump into a new server is the upgrade
// path).
func RestoreTools(ctx context.Context, programs *pgbin.Finder, m *archive.Manifest, target pg.Server) (pgbin.Tools, error) {
	var dumpMajor int
	fmt.Sscanf(m.PgDumpVersion, "%d", &dumpMajor)
	tools, err := programs.Find(ctx, max(dumpMajor, target.Major()))
	if err != nil {
		return pgbin.Tools{}, fmt.Errorf("restoring a dump of PostgreSQL %s into PostgreSQL %d: %w", m.ServerVersion, target.Major(), err)
	}
	return tools, nil
}
