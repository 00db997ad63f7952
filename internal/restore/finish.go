package restore

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// setSequences restores every sequence's value as of the dump.
func (r *run) setSequences(ctx context.Context) error {
	if len(r.m.Sequences) == 0 {
		return nil
	}
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range r.m.Sequences {
		name := pg.Qualified(s.Schema, s.Name)
		q := fmt.Sprintf("SELECT pg_catalog.setval(%s, %d, %t)", pg.Literal(name), s.LastValue, s.IsCalled)
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("set sequence %s: %w", name, err)
		}
	}
	return nil
}

// refreshMatviews fills the materialized views that were populated in the
// source, in creation order so that one built on another comes after it.
func (r *run) refreshMatviews(ctx context.Context) error {
	if len(r.m.Matviews) == 0 {
		return nil
	}
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, mv := range r.m.Matviews {
		name := pg.Qualified(mv.Schema, mv.Name)
		if _, err := conn.Exec(ctx, "REFRESH MATERIALIZED VIEW "+name); err != nil {
			return fmt.Errorf("refresh materialized view %s: %w", name, err)
		}
	}
	return nil
}
