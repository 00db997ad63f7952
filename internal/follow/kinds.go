package follow

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Kinds names, for finish's verdict, each kind of difference between the
// source and the target once the target caught up: DDL (schema, or a
// table only one side has), unlogged tables and materialized views
// (logical replication carries neither), large objects changed after
// finish copied them, and the rows of
// followed tables, with the writes the source took since the target
// caught up when there were any (writes went on, unfenced).
func Kinds(ctx context.Context, src *pgx.ConnConfig, schema bool, entries []compare.Pair, v Verification) ([]string, error) {
	var kinds []string
	if schema {
		kinds = append(kinds, "DDL: the schemas differ (DDL the follow did not replay: run on the target, or on a source without the DDL capture)")
	}
	conn, err := pg.Connect(ctx, src)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = e.Key
	}
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text, c.relpersistence::text
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE format('%I.%I', n.nspname, c.relname) = ANY ($1::text[])`, keys)
	if err != nil {
		return nil, fmt.Errorf("read the differing relations' kinds: %w", err)
	}
	kind := map[string]string{}
	for rows.Next() {
		var name, relkind, persistence string
		if err := rows.Scan(&name, &relkind, &persistence); err != nil {
			return nil, fmt.Errorf("read the differing relations' kinds: %w", err)
		}
		kind[name] = relkind + persistence
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the differing relations' kinds: %w", err)
	}
	var ddl, unlogged, matviews, los, changed, seqs []string
	for _, e := range entries {
		switch k := kind[e.Key]; {
		case strings.HasPrefix(e.Key, "large object "):
			los = append(los, strings.TrimPrefix(e.Key, "large object "))
		case !e.InA || !e.InB:
			ddl = append(ddl, e.Key)
		case strings.HasPrefix(k, "m"):
			matviews = append(matviews, e.Key)
		case strings.HasSuffix(k, "u"):
			unlogged = append(unlogged, e.Key)
		case strings.HasPrefix(k, "S"):
			seqs = append(seqs, e.Key)
		default:
			changed = append(changed, e.Key)
		}
	}
	list := func(s []string) string { return pg.Shorten(strings.Join(s, ", "), 200) }
	if len(ddl) > 0 {
		kinds = append(kinds, "DDL: relations on one side only: "+list(ddl))
	}
	if len(unlogged) > 0 {
		kinds = append(kinds, "unlogged tables (their changes are not followed): "+list(unlogged))
	}
	if len(matviews) > 0 {
		kinds = append(kinds, "materialized view contents (their rows are not replicated, only a REFRESH run on the source is: REFRESH MATERIALIZED VIEW each on the source, then finish again): "+list(matviews))
	}
	if len(los) > 0 {
		kinds = append(kinds, "large objects changed after finish copied them: "+list(los))
	}
	if len(seqs) > 0 {
		kinds = append(kinds, "sequences changed after finish copied them: "+list(seqs))
	}
	if len(changed) > 0 {
		k := "rows of " + list(changed)
		if v.Writes != nil {
			n, err := v.Writes(ctx)
			if err != nil {
				return nil, err
			}
			if n > 0 {
				k = fmt.Sprintf("writes that went on: the source took %d transaction ids after the target caught up, and the rows of %s differ", n, list(changed))
			}
		}
		kinds = append(kinds, k)
	}
	return kinds, nil
}
