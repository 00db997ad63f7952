package preflight

import (
	"context"
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
