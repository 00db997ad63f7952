package dump

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// This file holds the dump's own checks, each one function: run by the
// dump at its start and, the same function, by `pgsprint preflight`'s
// checklists, which import the stage (the stage never imports preflight).

// compressionRatio is the archive's size against the tables' on disk
// that a compressed dump is estimated at: COPY text is typically a little
// smaller than the heap, and zstd and lz4 shrink it 3 to 10 times (see
// BENCHMARKS.md); an uncompressed archive is taken at the heap's size.
const compressionRatio = 4

// ArchiveEstimate is the size an archive of tables occupying raw bytes
// on disk is estimated at.
func ArchiveEstimate(raw int64, compressed bool) int64 {
	if compressed {
		return raw / compressionRatio
	}
	return raw
}

// DiskSpace checks that the file system of dir can take about need
// bytes of what (e.g. "the archive"), without writing anything: it fails
// when the directory cannot be written or holds less than half of need
// (the estimate would have to be more than twice too large for the run to
// fit), and warns when it holds less than need (warning, with detail
// saying why). preflight lists it; a dump refuses to start on its error.
func DiskSpace(dir string, need int64, what string) (warning bool, detail string, err error) {
	st, err := os.Stat(dir)
	if err != nil {
		return false, "", fmt.Errorf("%w: create it, or write %s elsewhere", err, what)
	}
	if !st.IsDir() {
		return false, "", fmt.Errorf("%s is not a directory: write %s elsewhere", dir, what)
	}
	if err := writable(dir); err != nil {
		return false, "", fmt.Errorf("%s cannot be written (%v): write %s where you may, or fix its permissions", dir, err, what)
	}
	free, ok := freeBytes(dir)
	switch {
	case !ok:
		return false, fmt.Sprintf("writable; free space not measured on this system (%s estimated at %s)", what, sizeText(need)), nil
	case free < need/2:
		return false, "", fmt.Errorf("%s estimated at %s, but %s has %s free: free space, or write %s elsewhere", what, sizeText(need), dir, sizeText(free), what)
	case free < need:
		return true, fmt.Sprintf("%s estimated at %s, %s free: it may not fit", what, sizeText(need), sizeText(free)), nil
	}
	return false, fmt.Sprintf("%s free, %s estimated at %s", sizeText(free), what, sizeText(need)), nil
}

// DirOf is the directory a file named path is created in.
func DirOf(path string) string {
	d := filepath.Dir(path)
	if d == "" {
		return "."
	}
	return d
}

// sizeText formats n in binary units.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
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

// PrivilegeError is the refusal of Readable or ReadableLargeObjects: what
// cannot be read, and the GRANT (or the other way) that fixes it.
type PrivilegeError struct{ error }

// CanRead refuses, before anything is read, a dump or clone whose role
// cannot read every table, sequence and large object f selects
// (Readable, ReadableLargeObjects): pg_dump, or a reader, would fail with
// "permission denied" only once it reached that table, after the work
// before it.
func CanRead(ctx context.Context, conn *pgx.Conn, f filter.Options) error {
	if _, _, err := Readable(ctx, conn, f, false); err != nil {
		return err
	}
	if f.LargeObjects() {
		if _, err := ReadableLargeObjects(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// Readable checks the right of conn's role to read the tables and
// sequences f selects: USAGE on their schema, SELECT on them, and no row
// security that would hide rows from it (pg_dump refuses to dump a table
// whose rows its policies filter). It returns how many are selected and,
// with sizes, the size on disk of the tables whose rows are read, heap
// and TOAST (none with --schema-only); a PrivilegeError names the first five it cannot
// read. Without sizes it takes no lock: pg_relation_size locks each table,
// and would wait, without --lock-wait-timeout, behind a session holding
// one in ACCESS EXCLUSIVE mode.
func Readable(ctx context.Context, conn *pgx.Conn, f filter.Options, sizes bool) (int, Volume, error) {
	selected, noData, err := f.Conditions("c", "n")
	if err != nil {
		return 0, Volume{}, err
	}
	size, toast := "0", "0"
	if sizes {
		read := `c.relkind = 'r' AND NOT (` + noData + `)`
		size = `CASE WHEN ` + read + ` THEN pg_catalog.pg_relation_size(c.oid) ELSE 0 END`
		// The TOAST table with its index: values too large for a
		// heap page, which an archive holds too.
		toast = `CASE WHEN ` + read + ` AND c.reltoastrelid <> 0 THEN pg_catalog.pg_total_relation_size(c.reltoastrelid) ELSE 0 END`
	}
	var n, bad int
	var raw Volume
	var names []string
	err = conn.QueryRow(ctx, `WITH me AS (SELECT rolsuper OR rolbypassrls AS bypass FROM pg_catalog.pg_roles WHERE rolname = current_user),
	sel AS (SELECT c.relkind, CASE
			WHEN NOT pg_catalog.has_schema_privilege(n.oid, 'USAGE') THEN 'no USAGE on schema ' || pg_catalog.quote_ident(n.nspname)
			WHEN NOT pg_catalog.has_table_privilege(c.oid, 'SELECT') THEN 'no SELECT on ' || CASE c.relkind WHEN 'S' THEN 'sequence ' ELSE 'table ' END
				|| pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname)
			WHEN c.relrowsecurity AND NOT (SELECT bypass FROM me) AND NOT pg_catalog.pg_has_role(c.relowner, 'USAGE')
				THEN 'row-level security on ' || pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) END AS why,
			`+size+` AS size, `+toast+` AS toast
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'S') AND c.relpersistence <> 't'
		AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
		AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
			WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
		AND (`+selected+`))
	SELECT count(*)::int, count(why)::int, coalesce(sum(size), 0)::bigint, coalesce(sum(toast), 0)::bigint,
		coalesce((SELECT array_agg(why) FROM (SELECT why FROM sel WHERE why IS NOT NULL LIMIT 5) w), '{}')
	FROM sel`).Scan(&n, &bad, &raw.Heap, &raw.Toast, &names)
	if err != nil {
		return 0, Volume{}, fmt.Errorf("read the source's catalog for the privileges on the selected tables: %w", err)
	}
	if f.SchemaOnly {
		raw = Volume{}
	}
	if bad > 0 {
		list := strings.Join(names, ", ")
		if bad > len(names) {
			list += fmt.Sprintf(" and %d more", bad-len(names))
		}
		return n, raw, PrivilegeError{fmt.Errorf("%d of %d selected tables and sequences cannot be read: %s: GRANT USAGE on the schema and SELECT on them to %s (row-level security: ALTER ROLE ... BYPASSRLS, or run as the owner), run as a role that can (--role), or leave them out (-T)", bad, n, list, pg.Ident(conn.Config().User))}
	}
	return n, raw, nil
}

// ReadableLargeObjects checks that conn's role can read every large
// object, returning how many there are; a PrivilegeError says how many it
// cannot.
func ReadableLargeObjects(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n, bad int
	err := conn.QueryRow(ctx, `SELECT count(*)::int, count(*) FILTER (WHERE NOT (
			(SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
			OR pg_catalog.current_setting('lo_compat_privileges')::bool
			OR pg_catalog.pg_has_role(m.lomowner, 'USAGE')
			OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(m.lomacl) a
				WHERE a.privilege_type = 'SELECT' AND (a.grantee = 0 OR pg_catalog.pg_has_role(a.grantee, 'USAGE')))))::int
		FROM pg_catalog.pg_largeobject_metadata m`).Scan(&n, &bad)
	switch {
	case err != nil:
		return 0, fmt.Errorf("read the large objects' privileges: %w", err)
	case bad > 0:
		return n, PrivilegeError{fmt.Errorf("%d of %d large objects cannot be read: GRANT SELECT ON LARGE OBJECT ... to %s, run as their owner, or select tables (-n/-t), which leaves large objects out", bad, n, pg.Ident(conn.Config().User))}
	}
	return n, nil
}

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
