package follow

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// probeReach checks, before anything is copied, that the target server
// can open a replication connection to the source with conninfo: an
// empty publication on the source, and on the target a subscription to
// it that connects (to read its empty table list) but has no slot and is
// not enabled; both are dropped at once. Without it a wrong conninfo
// would be found only after the whole copy.
func probeReach(ctx context.Context, sconn *pgx.Conn, dst *pgx.ConnConfig, n Names, conninfo string) (err error) {
	dconn, err := pg.Connect(ctx, dst)
	if err != nil {
		return err
	}
	defer dconn.Close(context.WithoutCancel(ctx))
	pub := pg.Ident(n.Publication)
	if _, err := sconn.Exec(ctx, "CREATE PUBLICATION "+pub); err != nil {
		return fmt.Errorf("create publication %s on the source: %w", n.Publication, err)
	}
	defer func() {
		if _, derr := sconn.Exec(context.WithoutCancel(ctx), "DROP PUBLICATION IF EXISTS "+pub); derr != nil {
			err = errors.Join(err, fmt.Errorf("drop publication %s on the source: %w", n.Publication, derr))
		}
	}()
	sub := pg.Ident(n.Slot)
	if _, err := dconn.Exec(ctx, "CREATE SUBSCRIPTION "+sub+" CONNECTION "+pg.Literal(conninfo)+" PUBLICATION "+pub+
		" WITH (connect = true, enabled = false, create_slot = false, slot_name = NONE, copy_data = false)"); err != nil {
		return fmt.Errorf("the target server cannot reach the source with the subscription's connection string: %w; give --follow-conninfo as the target server must connect (the connection string is not printed: it may hold a password)", err)
	}
	if _, err := dconn.Exec(ctx, "DROP SUBSCRIPTION "+sub); err != nil {
		return fmt.Errorf("drop probe subscription %s on the target: %w", n.Slot, err)
	}
	return nil
}
