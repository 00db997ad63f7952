package follow

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// distinct refuses a source that is the target's own database, whatever
// the two connection strings look like (pg.SeenBy: a source session is
// looked for among the target database's sessions), before anything is
// dropped: finish or abort with the source given as --target would drop
// the live follow's publication, slot and DDL capture.
func distinct(ctx context.Context, src *pgx.ConnConfig, dconn *pgx.Conn) error {
	if same, err := pg.SeenBy(ctx, src, dconn, "pgsprint follow", true); err != nil || !same {
		return err
	}
	return fmt.Errorf("--source and --target are the same database (%s): give the clone's target as --target", pg.Describe(dconn.Config()))
}
