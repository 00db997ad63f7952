package follow

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// newTables lists the tables the source publishes that the target's
// subscription does not hold yet: tables created on the source since the
// clone (the target created them when it replayed their CREATE TABLE),
// new partitions included.
func newTables(ctx context.Context, sconn, dconn *pgx.Conn, n Names) ([]string, error) {
	published, err := publishedLeaves(ctx, sconn, n.Publication)
	if err != nil {
		return nil, err
	}
	subscribed, err := pg.QueryStrings(ctx, dconn, `SELECT pg_catalog.format('%I.%I', ns.nspname, c.relname)
		FROM pg_catalog.pg_subscription_rel r JOIN pg_catalog.pg_subscription s ON s.oid = r.srsubid
		JOIN pg_catalog.pg_class c ON c.oid = r.srrelid JOIN pg_catalog.pg_namespace ns ON ns.oid = c.relnamespace
		WHERE s.subname = $1 AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())`, n.Slot)
	if err != nil {
		return nil, fmt.Errorf("list subscription %s's tables on the target: %w", n.Slot, err)
	}
	have := map[string]bool{}
	for _, t := range subscribed {
		have[t] = true
	}
	var missing []string
	for _, t := range published {
		if !have[t] {
			missing = append(missing, t)
		}
	}
	return missing, nil
}

// publishedLeaves lists the tables whose changes the publication sends
// (pg_publication_tables: partitions rather than their root).
func publishedLeaves(ctx context.Context, conn *pgx.Conn, pub string) ([]string, error) {
	return publicationTables(ctx, conn, `SELECT pg_catalog.format('%I.%I', schemaname, tablename)
		FROM pg_catalog.pg_publication_tables WHERE pubname = $1 ORDER BY 1`, pub)
}

// publicationTables runs query, which lists tables of publication pub by
// qualified name: publishedTables and publishedLeaves differ only in it.
func publicationTables(ctx context.Context, conn *pgx.Conn, query, pub string) ([]string, error) {
	tables, err := pg.QueryStrings(ctx, conn, query, pub)
	if err != nil {
		return nil, fmt.Errorf("list publication %s's tables: %w", pub, err)
	}
	return tables, nil
}

// syncNewTables has the target subscribe to the tables the publication
// gained (ALTER SUBSCRIPTION ... REFRESH PUBLICATION WITH (copy_data =
// true): each is copied by a table sync worker, then followed) and waits
// until every table of the subscription is synchronised. It returns the
// tables added. The target must have the tables: their CREATE TABLE,
// replayed in order, comes before their rows.
func syncNewTables(ctx context.Context, sconn, dconn *pgx.Conn, n Names, timeout time.Duration, log *slog.Logger) ([]string, error) {
	missing, err := newTables(ctx, sconn, dconn, n)
	if err != nil || len(missing) == 0 {
		return nil, err
	}
	sub := pg.Ident(n.Slot)
	before, err := readSubscription(ctx, dconn, n.Slot)
	if err != nil {
		return nil, err
	}
	if _, err := dconn.Exec(ctx, "ALTER SUBSCRIPTION "+sub+" REFRESH PUBLICATION WITH (copy_data = true)"); err != nil {
		return nil, fmt.Errorf("subscribe the target to the tables created on the source since the clone (%s): %w", pg.Shorten(strings.Join(missing, ", "), 200), err)
	}
	log.Info("follow: copying the tables created on the source since the clone", "tables", strings.Join(missing, ", "))
	deadline := time.Now().Add(timeout)
	for {
		waiting, err := copyingTables(ctx, dconn, n.Slot)
		if err != nil {
			return nil, err
		}
		if len(waiting) == 0 {
			return missing, nil
		}
		if before != nil && before.SyncErrors >= 0 {
			now, err := readSubscription(ctx, dconn, n.Slot)
			if err != nil {
				return nil, err
			}
			if now != nil && now.SyncErrors > before.SyncErrors {
				return nil, fmt.Errorf("the target fails to copy the tables created on the source since the clone (%s): %d sync errors; see the target's server log", pg.Shorten(strings.Join(waiting, ", "), 200), now.SyncErrors)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the target has not copied the tables created on the source since the clone within %s: %s", timeout, pg.Shorten(strings.Join(waiting, ", "), 200))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// followDDLAfterCatchUp is finish's step after the target caught up
// under the fence (no more DDL can come): a captured statement the target
// cannot replay stops it; the tables created since the clone are copied
// and, when there were any, the target catches up again. It returns the
// source position caught up to.
func followDDLAfterCatchUp(ctx context.Context, sconn, dconn *pgx.Conn, n Names, partial bool, caughtUp string, timeout, stall time.Duration, log *slog.Logger) (string, error) {
	ddl, err := followDDL(ctx, sconn, dconn, n, partial)
	if err != nil {
		return "", err
	}
	if err := ddl.Err(); err != nil {
		return "", err
	}
	added, err := syncNewTables(ctx, sconn, dconn, n, timeout, log)
	if err != nil {
		return "", err
	}
	if len(added) > 0 {
		sub, err := readSubscription(ctx, dconn, n.Slot)
		if err != nil {
			return "", err
		}
		baseline := int64(-1)
		if sub != nil {
			baseline = sub.ApplyErrors
		}
		if caughtUp, err = waitCaughtUp(ctx, sconn, dconn, n.Slot, baseline, timeout, stall, log); err != nil {
			return "", err
		}
	}
	refreshed, err := refreshMatviews(ctx, sconn, dconn, n.Slot)
	if len(refreshed) > 0 {
		log.Info("follow: refreshed on the target the materialized views over tables created during the follow", "views", strings.Join(refreshed, ", "))
	}
	return caughtUp, err
}

// beforeFence is finish's step before the fence: DDL that the target
// cannot follow stops it while the source is still writable, and the
// tables created since the clone are copied while the writes go on (if
// the target has not yet replayed their CREATE TABLE, the copy waits for
// the step after the catch-up).
func beforeFence(ctx context.Context, sconn, dconn *pgx.Conn, n Names, partial bool, timeout time.Duration, log *slog.Logger) error {
	ddl, err := followDDL(ctx, sconn, dconn, n, partial)
	if err != nil {
		return err
	}
	if err := ddl.Err(); err != nil {
		return err
	}
	if !ddl.Captured {
		return nil
	}
	if _, err := syncNewTables(ctx, sconn, dconn, n, timeout, log); err != nil {
		log.Info("follow: new tables are copied after the fence", "reason", err)
	}
	return nil
}
