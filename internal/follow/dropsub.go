package follow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// dropTry bounds one DROP SUBSCRIPTION, and dropTries how many are made:
// abort and finish's handover must never hang.
const (
	dropTry   = 5 * time.Second
	dropTries = 6
)

// dropSubscription drops the subscription on the target, with its slots
// on the source, in bounded time. A table created during the follow is
// copied through a slot of its own, which the source builds only once
// every transaction under way has ended, prepared ones included (in any
// database of the source's server); DROP SUBSCRIPTION waits for that
// slot to be released, so for as long as a prepared transaction stays
// open. Each try runs under a statement timeout, after ending the source
// sessions (walsenders) that hold such a copy slot of this subscription;
// when the tries run out, the error names the prepared transactions.
func dropSubscription(ctx context.Context, sconn, dconn *pgx.Conn, slot string) error {
	var oid uint32
	err := dconn.QueryRow(ctx, `SELECT oid FROM pg_catalog.pg_subscription WHERE subname = $1
		AND subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())`, slot).Scan(&oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read subscription %s on the target: %w", slot, err)
	}
	if _, err := dconn.Exec(ctx, fmt.Sprintf("SET statement_timeout = %d", dropTry.Milliseconds())); err != nil {
		return fmt.Errorf("bound the drop of subscription %s: %w", slot, err)
	}
	defer dconn.Exec(context.WithoutCancel(ctx), "RESET statement_timeout")
	name := pg.Ident(slot)
	for try := 1; ; try++ {
		endCopySlots(ctx, sconn, oid)
		_, err := dconn.Exec(ctx, "DROP SUBSCRIPTION IF EXISTS "+name)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "57014" || try == dropTries { // query_canceled: the timeout
			if err != nil && errors.As(err, &pgErr) && pgErr.Code == "57014" {
				return fmt.Errorf("drop subscription %s on the target: it waited %s for the source to release the slot of a table copy%s; then run pgsprint follow abort again",
					slot, dropTry*dropTries, preparedAdvice(ctx, sconn))
			}
			return err
		}
	}
}

// endCopySlots ends the source sessions that hold a table copy's slot of
// the subscription whose OID is oid (pg_<oid>_sync_<relid>_<system id>,
// PostgreSQL 14 and later): a copy that waits for a prepared transaction
// to end waits in such a session. Errors (no right to end them) are left
// to the drop's timeout, which says what to do.
func endCopySlots(ctx context.Context, sconn *pgx.Conn, oid uint32) {
	_, _ = sconn.Exec(ctx, `SELECT pg_catalog.pg_terminate_backend(active_pid) FROM pg_catalog.pg_replication_slots
		WHERE active_pid IS NOT NULL AND slot_name LIKE $1`, fmt.Sprintf("pg\\_%d\\_sync\\_%%", oid))
}

// preparedAdvice names the prepared transactions of the source's server
// (every database: a slot waits for them all), for an error: "" when
// there are none.
func preparedAdvice(ctx context.Context, sconn *pgx.Conn) string {
	rows, err := sconn.Query(ctx, `SELECT pg_catalog.format('%L (database %I, prepared %s)', gid, database, prepared)
		FROM pg_catalog.pg_prepared_xacts ORDER BY prepared`)
	if err != nil {
		return ""
	}
	p, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(p) == 0 {
		return ""
	}
	return fmt.Sprintf(", which waits for the source's %d prepared transactions: %s: COMMIT PREPARED or ROLLBACK PREPARED each on the source",
		len(p), pg.Shorten(strings.Join(p, ", "), 300))
}
