package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Snapshot is the leader's open transaction whose snapshot every worker and
// pg_dump import. It must stay open until they all have, so the leader keeps
// it until the dump ends.
type Snapshot struct {
	ID   string
	Time time.Time
}

// ExportSnapshot starts a REPEATABLE READ READ ONLY transaction on conn and
// exports its snapshot. Works on a hot standby and without superuser.
func ExportSnapshot(ctx context.Context, conn *pgx.Conn) (*Snapshot, error) {
	return exportSnapshot(ctx, conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
}

// ExportSafeSnapshot is ExportSnapshot from a SERIALIZABLE READ ONLY
// DEFERRABLE transaction, as pg_dump --serializable-deferrable: the server
// hands it a snapshot only once no serializable transaction still running
// could make it show an anomaly, so that a dump of a database whose writers
// rely on SERIALIZABLE matches some serial order of their transactions. It
// may wait for those writers; a hot standby cannot run it.
func ExportSafeSnapshot(ctx context.Context, conn *pgx.Conn) (*Snapshot, error) {
	return exportSnapshot(ctx, conn, "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE")
}

func exportSnapshot(ctx context.Context, conn *pgx.Conn, begin string) (*Snapshot, error) {
	if _, err := conn.Exec(ctx, begin); err != nil {
		return nil, fmt.Errorf("begin snapshot transaction: %w", err)
	}
	var s Snapshot
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_export_snapshot(), pg_catalog.now()").Scan(&s.ID, &s.Time); err != nil {
		return nil, fmt.Errorf("export snapshot: %w", err)
	}
	return &s, nil
}

// ErrSnapshotNotFound is wrapped by ImportSnapshot's error when the server
// knows no exported snapshot of that id: the transaction that exported it
// has ended (or the id is mistyped). Callers that import a snapshot held by
// another process (clone --snapshot) test for it to say which process is
// missing.
var ErrSnapshotNotFound = errors.New("snapshot does not exist")

// ImportSnapshot makes conn see exactly what the leader's snapshot sees.
func ImportSnapshot(ctx context.Context, conn *pgx.Conn, id string) error {
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return fmt.Errorf("begin worker transaction: %w", err)
	}
	if _, err := conn.Exec(ctx, "SET TRANSACTION SNAPSHOT "+Literal(id)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "22023" { // invalid_parameter_value: "invalid snapshot identifier"
			return fmt.Errorf("import snapshot %s: %w (%s)", id, ErrSnapshotNotFound, pgErr.Message)
		}
		return fmt.Errorf("import snapshot %s: %w", id, err)
	}
	return nil
}
