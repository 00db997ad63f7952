package restore

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// chooseTools picks pg_restore and psql at least as new as both the pg_dump
// that wrote the archive's schema (older ones cannot read its format) and
// the target server (pg_restore must understand the server it talks to, as
// for pg_dump; restoring an old dump into a new server is the upgrade path).
// A target older than the source is allowed but logged: PostgreSQL does not
// promise that a newer server's DDL loads into an older one.
func (r *run) chooseTools(ctx context.Context) (pgbin.Tools, error) {
	conn, err := pg.Connect(ctx, r.opts.Target)
	if err != nil {
		return pgbin.Tools{}, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	srv, err := pg.ReadServer(ctx, conn)
	if err != nil {
		return pgbin.Tools{}, fmt.Errorf("target: %w", err)
	}
	// The workers and a control connection (or pg_restore).
	if err := pg.CheckConnectionRoom(ctx, conn, r.opts.Jobs, r.opts.Jobs+1); err != nil {
		return pgbin.Tools{}, err
	}
	r.targetMajor = srv.Major()
	need := max(majorOf(r.m.PgDumpVersion), srv.Major())
	tools, err := pgbin.Find(ctx, need)
	if err != nil {
		return pgbin.Tools{}, fmt.Errorf("restoring a dump of PostgreSQL %s into PostgreSQL %d: %w", r.m.ServerVersion, srv.Major(), err)
	}
	if src := r.m.ServerVersionNum / 10000; src > srv.Major() {
		r.log.Warn("target server is older than the source: PostgreSQL does not support loading a newer server's schema into an older one, so some DDL may fail",
			"source", r.m.ServerVersion, "target", srv.Major())
	}
	r.log.Info("client programs", "pg_restore", tools.PgRestore(), "version", tools.Version,
		"source_server", r.m.ServerVersion, "target_server", srv.Version)
	return tools, nil
}
