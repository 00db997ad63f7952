package follow

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/preflight"
)

// checkTarget checks that the target may create the subscription
// (preflight.FollowTarget).
func checkTarget(ctx context.Context, cfg *pgx.ConnConfig, n Names) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	items, err := preflight.FollowTarget(ctx, conn, n.Slot)
	if err != nil {
		return err
	}
	return preflight.Failed(items)
}
