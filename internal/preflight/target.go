package preflight

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
)

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

// ErrSameDatabase is returned, before anything is read or written, when a
// clone's source and target are one database: the clone would create
// over, load into and (with --clean) drop the very tables it reads, and
// the target's DDL could wait for the source's locks, held by the same
// clone.
var ErrSameDatabase = errors.New("--source and --target are the same database")

// DistinctDatabases refuses (ErrSameDatabase) a source that names the
// database target is connected to. It opens a source connection whose
// application_name is a random token and looks for it in the target's
// pg_stat_activity, in the target's database (pg.SeenBy). That works for
// any user (pid, datname and application_name of every session are
// visible without privileges), whatever the two connection strings look
// like (socket or TCP, host names, aliases, a pooler in session mode),
// and never mistakes two servers for one: unlike pg_control_system()'s
// system_identifier (superuser or pg_monitor only, and shared by a
// primary, its standbys and every server restored from its base backups)
// or the server's address, port and start time (a name may not resolve
// to the address the server sees).
func DistinctDatabases(ctx context.Context, source *pgx.ConnConfig, target *pgx.Conn) error {
	same, err := pg.SeenBy(ctx, source, target, "pgsprint clone", true)
	switch {
	case err != nil:
		return err
	case same:
		return fmt.Errorf("%w (%s): a clone into its own source would overwrite what it reads", ErrSameDatabase, pg.Describe(target.Config()))
	}
	return nil
}
