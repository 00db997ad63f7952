package clone

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// ErrSameDatabase is returned, before anything is read or written, when
// the source and the target are one database: the clone would create
// over, load into and (with --clean) drop the very tables it reads, and
// the target's DDL could wait for the source's locks, held by the same
// clone.
var ErrSameDatabase = errors.New("--source and --target are the same database")

// sameDatabase reports whether source names the database target is
// connected to. It opens a source connection whose application_name is a
// random token and looks for it in the target's pg_stat_activity, in the
// target's database. That works for any user (pid, datname and
// application_name of every session are visible without privileges),
// whatever the two connection strings look like (socket or TCP, host
// names, aliases, a pooler in session mode), and never mistakes two
// servers for one: unlike pg_control_system()'s system_identifier
// (superuser or pg_monitor only, and shared by a primary, its standbys
// and every server restored from its base backups) or the server's
// address, port and start time (a name may not resolve to the address the
// server sees).
func sameDatabase(ctx context.Context, source *pgx.ConnConfig, target *pgx.Conn) (bool, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return false, err
	}
	token := "pgsprint clone " + hex.EncodeToString(b[:])
	cfg := source.Copy()
	cfg.RuntimeParams = map[string]string{}
	for k, v := range source.RuntimeParams {
		cfg.RuntimeParams[k] = v
	}
	cfg.RuntimeParams["application_name"] = token
	probe, err := pg.Connect(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer probe.Close(context.WithoutCancel(ctx))
	var same bool
	err = target.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity
		WHERE application_name = $1 AND datname = pg_catalog.current_database())`, token).Scan(&same)
	if err != nil {
		return false, fmt.Errorf("compare the source with the target: %w", err)
	}
	return same, nil
}
