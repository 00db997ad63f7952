package follow

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// handoverMark is the comment finish puts on the publication once it has
// verified and begins to drop the replication: a finish that finds no
// subscription and no fence of its own reads it to tell an interrupted
// handover (--no-fence) from a follow that never began.
const handoverMark = "pgsprint: verified, handing over"

// markHandover marks the publication (if it is still there) as handed
// over, before the subscription is dropped.
func markHandover(ctx context.Context, sconn *pgx.Conn, n Names) error {
	// pgsprint.capture = off: the DDL capture leaves this statement out,
	// so the target never tries to replay a comment on a publication it
	// does not have (the torture run, seed 1001 round 59).
	if _, err := sconn.Exec(ctx, "SET pgsprint.capture = off"); err != nil {
		return fmt.Errorf("mark publication %s on the source as handed over: %w", n.Publication, err)
	}
	defer sconn.Exec(context.WithoutCancel(ctx), "RESET pgsprint.capture")
	_, err := sconn.Exec(ctx, "COMMENT ON PUBLICATION "+pg.Ident(n.Publication)+" IS "+pg.Literal(handoverMark))
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42704") { // undefined_object: dropped already
		return fmt.Errorf("mark publication %s on the source as handed over: %w", n.Publication, err)
	}
	return nil
}

// handedOver refuses a finish that finds no subscription on the target
// and no fence of its own on the source, unless the publication carries
// handoverMark (an earlier finish verified, then was interrupted dropping
// the replication): such a follow never began (clone --follow stopped
// after its copy, before it subscribed), or was removed by hand. Nothing
// was verified then: dropping the slot and comparing the databases would
// report a cutover that never happened.
func handedOver(ctx context.Context, sconn *pgx.Conn, n Names) error {
	var comment *string
	err := sconn.QueryRow(ctx, `SELECT pg_catalog.obj_description(oid, 'pg_publication') FROM pg_catalog.pg_publication WHERE pubname = $1`, n.Publication).Scan(&comment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("nothing to finish: the target has no subscription %s and the source no publication %s: no follow of that name runs (a clone --follow that failed removes what it created; see pgsprint follow status); nothing was compared or changed", n.Slot, n.Publication)
	case err != nil:
		return fmt.Errorf("read publication %s on the source: %w", n.Publication, err)
	case comment != nil && *comment == handoverMark:
		return nil
	}
	return fmt.Errorf("nothing to finish: the target has no subscription %s, yet the source has publication %s and no finish handed it over: the follow never began (clone --follow stopped before it subscribed) or its subscription was dropped by hand; nothing was compared, dropped or fenced: pgsprint follow abort removes the slot and the publication, then clone --follow again", n.Slot, n.Publication)
}
