package follow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// ErrBusy is returned by Finish and Abort when another finish or abort of
// the same follow holds its cutover lock: two cutovers at once would each
// fence, end the other's sessions and lift the other's fence, and a write
// could reach the source after the target stopped following it.
var ErrBusy = errors.New("another pgsprint follow finish or abort of this follow is running")

// lockApplication is the application_name of the session that holds the
// cutover lock: endSessions leaves it alone, and a refused run names it.
const lockApplication = "pgsprint follow lock"

// cutoverLock is a session-level advisory lock on the source database,
// keyed by the follow's slot name, held by a connection of its own for
// the whole of a finish or abort. The server releases it when that
// session ends, however the run ends (kill -9 included): a lock never
// outlives its run, and a run never proceeds beside another.
type cutoverLock struct {
	conn *pgx.Conn
	// PID is the backend holding the lock: the fence must not end it.
	PID int32
}

// lockKeys is the advisory lock's two keys (hashtext of each, which every
// supported server has): one lock per follow and source database
// (advisory locks are per database).
const lockKeys = "pg_catalog.hashtext('pgsprint follow cutover'), pg_catalog.hashtext($1)"

// lockCutover takes the cutover lock of slot's follow on the source, or
// returns ErrBusy at once naming the session that holds it (its pid, when
// it started, its client).
func lockCutover(ctx context.Context, src *pgx.ConnConfig, slot string) (*cutoverLock, error) {
	cfg := writable(src)
	cfg.RuntimeParams["application_name"] = lockApplication
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var got bool
	var pid int32
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_try_advisory_lock("+lockKeys+"), pg_catalog.pg_backend_pid()",
		slot).Scan(&got, &pid); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("take the cutover lock on the source: %w", err)
	}
	if got {
		return &cutoverLock{conn: conn, PID: pid}, nil
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// pg_locks shows a two-key lock as classid and objid, objsubid 2.
	var holder int32
	var started time.Time
	var client string
	err = conn.QueryRow(ctx, `SELECT a.pid, a.backend_start, coalesce(host(a.client_addr), 'local')
		FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
		AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		AND (l.classid::int4, l.objid::int4) = (`+lockKeys+`)
		LIMIT 1`, slot).Scan(&holder, &started, &client)
	switch {
	case err == pgx.ErrNoRows:
		return nil, fmt.Errorf("%w (slot %s): its session ended just now; run again", ErrBusy, slot)
	case err != nil:
		return nil, fmt.Errorf("%w (slot %s), and reading which one failed: %v", ErrBusy, slot, err)
	}
	return nil, fmt.Errorf("%w (slot %s): held by the source's session pid %d, started %s, client %s; wait for it to end, or end that session (SELECT pg_terminate_backend(%d)) if its run is gone",
		ErrBusy, slot, holder, started.Format(time.RFC3339), client, holder)
}

// check fails when the lock's session is gone (ended by a DBA, or the
// source restarted): the lock went with it, and another run may start.
func (l *cutoverLock) check(ctx context.Context) error {
	if _, err := l.conn.Exec(ctx, "SELECT 1"); err != nil {
		return fmt.Errorf("the session holding the cutover lock on the source is gone (%v): another finish or abort could run beside this one", err)
	}
	return nil
}

// release ends the lock's session, which releases the lock.
func (l *cutoverLock) release(ctx context.Context) {
	l.conn.Close(context.WithoutCancel(ctx))
}
