package preflight

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/subset"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// privileges adds the check of CanCreate on the target.
func (c *Checklist) privileges(ctx context.Context, conn *pgx.Conn, m *archive.Manifest, dataOnly bool) {
	c.add(check("target privileges", restore.CanCreate(ctx, conn, m, dataOnly), "CREATE on the target database and on its schemas the archive uses"))
}

// rules adds the checks of --subset's and --mask's rules against the
// source, by the functions the run calls (subset.Compute, mask.Resolve),
// in a read-only transaction rolled back after: an unknown table or
// column, a condition that does not parse, a masked key are refused here
// as the run refuses them. A rule naming what the source lacks is a
// usage error, as the run's (Checklist.Usage).
func (c *Checklist) rules(ctx context.Context, conn *pgx.Conn, srv pg.Server, sub subset.Spec, mk mask.Spec) {
	if !sub.Active() && !mk.Active() {
		return
	}
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		c.add(verdict.Fail("rules", err))
		return
	}
	defer conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	if sub.Active() {
		_, err := subset.Compute(ctx, conn, sub, subset.Options{Server: srv})
		var re *subset.RefusedError
		if errors.As(err, &re) {
			c.Usage = AsUsage(err)
		}
		c.add(check("subset", err, fmt.Sprintf("%d rules: their tables, columns and conditions are the source's", len(sub.Seeds)+len(sub.Refs))))
		if err != nil {
			return // the transaction may be aborted
		}
	}
	if mk.Active() {
		_, err := mask.Resolve(ctx, conn, mk, srv.Encoding)
		var re *mask.RefusedError
		if errors.As(err, &re) {
			c.Usage = AsUsage(err)
		}
		c.add(check("mask", err, fmt.Sprintf("%d rules fit the source's columns and keys", len(mk.Rules))))
	}
}
