package follow

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// refreshMatviews is finish's step once the target caught up under the
// fence: a materialized view over a table created during the follow was
// computed on the target when it replayed the CREATE, before the table's
// rows were copied, so it is empty there. Each populated one whose rows
// (over the tables the target copied since the clone, through views and
// other materialized views too) differ from the source's is refreshed
// on the target, in dependency order. A view left different is one the
// source has not refreshed since its tables changed: the comparison says
// so. It returns the views refreshed.
func refreshMatviews(ctx context.Context, sconn, dconn *pgx.Conn, slot string) ([]string, error) {
	views, err := pg.QueryStrings(ctx, dconn, `WITH RECURSIVE copied AS (
			SELECT r.srrelid AS rel FROM pg_catalog.pg_subscription_rel r JOIN pg_catalog.pg_subscription s ON s.oid = r.srsubid
			WHERE s.subname = $1 AND r.srsublsn IS NOT NULL
			AND s.subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())),
		deps(rel, depth) AS (
			SELECT rel, 0 FROM copied
			UNION
			SELECT w.ev_class, deps.depth + 1 FROM deps
			JOIN pg_catalog.pg_depend d ON d.refobjid = deps.rel AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
				AND d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
			JOIN pg_catalog.pg_rewrite w ON w.oid = d.objid
			WHERE w.ev_class <> deps.rel AND deps.depth < 32)
		SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) FROM deps
		JOIN pg_catalog.pg_class c ON c.oid = deps.rel JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind = 'm' AND c.relispopulated
		GROUP BY 1 ORDER BY max(deps.depth), 1`, slot)
	if err != nil {
		return nil, fmt.Errorf("list the target's materialized views over new tables: %w", err)
	}
	var refreshed []string
	for _, v := range views {
		a, err := matviewHash(ctx, sconn, v)
		if err != nil || a == "" {
			return refreshed, err // "": not populated on the source, which the comparison reports
		}
		b, err := matviewHash(ctx, dconn, v)
		if err != nil || a == b {
			if err != nil {
				return refreshed, err
			}
			continue
		}
		if _, err := dconn.Exec(ctx, "REFRESH MATERIALIZED VIEW "+v); err != nil {
			return refreshed, fmt.Errorf("refresh materialized view %s on the target: %w", v, err)
		}
		refreshed = append(refreshed, v)
	}
	return refreshed, nil
}

// matviewHash hashes a materialized view's rows on one side: "" when it
// is not there or not populated.
func matviewHash(ctx context.Context, conn *pgx.Conn, view string) (string, error) {
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT relispopulated FROM pg_catalog.pg_class
		WHERE oid = pg_catalog.to_regclass($1) AND relkind = 'm'), false)`, view).Scan(&ok); err != nil || !ok {
		if err != nil {
			return "", fmt.Errorf("read materialized view %s: %w", view, err)
		}
		return "", nil
	}
	var h string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.md5(coalesce(pg_catalog.string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM "+view+" t").Scan(&h); err != nil {
		return "", fmt.Errorf("hash materialized view %s: %w", view, err)
	}
	return h, nil
}
