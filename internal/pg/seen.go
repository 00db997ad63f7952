package pg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SeenBy reports whether a connection opened with source shows up in
// target's pg_stat_activity, under a random application_name starting
// with label; with sameDatabase, only in target's own database. It is how
// clone refuses to copy a database (or, with --all, a server) onto itself
// whatever the two connection strings look like: every user sees the
// application_name and datname of every session, and two servers are
// never taken for one.
func SeenBy(ctx context.Context, source *pgx.ConnConfig, target *pgx.Conn, label string, sameDatabase bool) (bool, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, err
	}
	token := label + " " + hex.EncodeToString(b[:])
	cfg := source.Copy()
	cfg.RuntimeParams = map[string]string{}
	for k, v := range source.RuntimeParams {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["application_name"] = token
	probe, err := Connect(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer probe.Close(context.WithoutCancel(ctx))
	q := `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity WHERE application_name = $1)`
	if sameDatabase {
		q = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity
			WHERE application_name = $1 AND datname = pg_catalog.current_database())`
	}
	var same bool
	if err := target.QueryRow(ctx, q, token).Scan(&same); err != nil {
		return false, fmt.Errorf("compare the source with the target: %w", err)
	}
	return same, nil
}
