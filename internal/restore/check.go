package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// This file holds the restore's own checks, each one function: run by
// the restore at its start and, the same function, by `pgsprint
// preflight`'s checklists, which import the stage (the stage never
// imports preflight).

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

// Journal decides what a journal found in the target database means for a
// run: found is its ID ("" when there is none), id the run's. An
// unfinished run is refused unless resumed (with the same archive) or
// started over (clean).
func Journal(found, id string, resume, clean bool, database string) error {
	switch {
	case found == "":
		return nil
	case !resume && !clean:
		return fmt.Errorf("target database %q holds an unfinished pgsprint restore or clone (schema %s): use --resume to finish it (a clone with the --snapshot it read), or --clean to start over",
			database, pg.Ident(journal.Schema))
	case resume && found != id:
		return fmt.Errorf("target database %q holds an unfinished restore of another archive (%s, this one is %s): resume with that archive, or use --clean without --resume to start over",
			database, found, id)
	}
	return nil
}

// DataTargets makes sure a --data-only run loads into tables that exist
// and are empty: rows added to a table's own would be a mix no archive
// ever held.
func DataTargets(ctx context.Context, conn *pgx.Conn, tables []archive.Table) error {
	for _, t := range tables {
		name := pg.Qualified(t.Schema, t.Name)
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
			return fmt.Errorf("inspect target: %w", err)
		}
		if !exists {
			return fmt.Errorf("--data-only: table %s does not exist in the target: create the schema first", name)
		}
		var rows bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM ONLY "+name+")").Scan(&rows); err != nil {
			return fmt.Errorf("inspect %s: %w", name, err)
		}
		if rows {
			return fmt.Errorf("--data-only: table %s already has rows: restore into empty tables", name)
		}
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
