package restore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// chooseTools picks pg_restore and psql at least as new as both the pg_dump
// that wrote the archive's schema (older ones cannot read its format) and
// the target server (pg_restore must understand the server it talks to, as
// for pg_dump; restoring an old dump into a new server is the upgrade path).
// A target older than the source is allowed but logged: PostgreSQL does not
// promise that a newer server's DDL loads into an older one. It returns
// the target server's major version too.
func chooseTools(ctx context.Context, opts Options, m *archive.Manifest, log *slog.Logger) (pgbin.Tools, int, error) {
	conn, err := pg.Connect(ctx, opts.Target)
	if err != nil {
		return pgbin.Tools{}, 0, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	srv, err := pg.ReadServer(ctx, conn)
	if err != nil {
		return pgbin.Tools{}, 0, fmt.Errorf("target: %w", err)
	}
	// The workers and a control connection (or pg_restore).
	if _, err := pg.ConnectionRoom(ctx, conn, opts.Jobs, opts.Jobs+1); err != nil {
		return pgbin.Tools{}, 0, err
	}
	tools, err := RestoreTools(ctx, opts.Programs, m, srv)
	if err != nil {
		return pgbin.Tools{}, 0, err
	}
	if src := m.ServerVersionNum / 10000; src > srv.Major() {
		log.Warn("target server is older than the source: PostgreSQL does not support loading a newer server's schema into an older one, so some DDL may fail",
			"source", m.ServerVersion, "target", srv.Major())
	}
	log.Info("client programs", "pg_restore", tools.PgRestore(), "version", tools.Version,
		"source_server", m.ServerVersion, "target_server", srv.Version)
	return tools, srv.Major(), nil
}
