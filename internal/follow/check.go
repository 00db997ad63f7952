package follow

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// readTarget reads the target's settings for a follow (ReadTargetSettings)
// on a connection of its own, and refuses on an unmet requirement.
func readTarget(ctx context.Context, cfg *pgx.ConnConfig, n Names) (TargetSettings, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return TargetSettings{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	t, err := ReadTargetSettings(ctx, conn, n.Slot)
	if err != nil {
		return t, err
	}
	return t, verdict.Failed(t.Requirements())
}

// noEquality lists, as "schema.table.column (type)", the columns of
// tables whose type has no equality operator (a default btree or hash
// operator class, through domains and arrays): under REPLICA IDENTITY
// FULL the target finds the row an UPDATE or DELETE changes by comparing
// every column, and its apply worker fails on such a column ("could not
// identify an equality operator for type json") and retries forever.
func noEquality(ctx context.Context, conn *pgx.Conn, tables []string) ([]string, error) {
	if len(tables) == 0 {
		return nil, nil
	}
	cols, err := pg.QueryStrings(ctx, conn, `WITH RECURSIVE base(attrelid, attnum, typ) AS (
			SELECT a.attrelid, a.attnum, a.atttypid FROM pg_catalog.pg_attribute a
			WHERE a.attrelid IN (SELECT pg_catalog.unnest($1::text[])::pg_catalog.regclass) AND a.attnum > 0 AND NOT a.attisdropped
			UNION ALL
			SELECT b.attrelid, b.attnum, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.typelem END
			FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.typ
			WHERE t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1)
		)
		SELECT DISTINCT format('%I.%I.%I (%s)', n.nspname, c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod))
		FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.typ
		JOIN pg_catalog.pg_attribute a ON a.attrelid = b.attrelid AND a.attnum = b.attnum
		JOIN pg_catalog.pg_class c ON c.oid = b.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE NOT (t.typtype = 'd' OR (t.typcategory = 'A' AND t.typelem <> 0 AND t.typlen = -1))
		AND t.typtype NOT IN ('e', 'r', 'm', 'c')
		AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_opclass oc JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod
			WHERE am.amname IN ('btree', 'hash') AND oc.opcdefault AND (oc.opcintype = t.oid
				OR EXISTS (SELECT 1 FROM pg_catalog.pg_cast k WHERE k.castsource = t.oid AND k.casttarget = oc.opcintype AND k.castmethod = 'b')))
		ORDER BY 1`, tables)
	if err != nil {
		return nil, fmt.Errorf("read the column types of the tables without key: %w", err)
	}
	return cols, nil
}
