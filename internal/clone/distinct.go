package clone

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

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
	if same, err := pg.SeenBy(ctx, source, target, "pgsprint clone", true); err != nil || !same {
		return err
	}
	return fmt.Errorf("%w (%s): a clone into its own source would overwrite what it reads", ErrSameDatabase, pg.Describe(target.Config()))
}
