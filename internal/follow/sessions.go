package follow

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// startingWait bounds how long endSessions waits for a session still
// starting at the fence to show in pg_stat_activity, where its start
// time says whether it may write, before ending it unseen.
const startingWait = 2 * time.Second

// endSessions ends the sessions of the source database that began
// before the fence, which may still write: it waits up to grace for the
// transactions under way at the fence to end (a busy session starts new
// ones all the time: those are not waited for), then terminates every
// such session (idle ones too: their next transaction could write) and
// waits until they are gone. Each is written to out.
//
// A session shows in pg_stat_activity only at the end of its start-up,
// after it has read the database's settings: one that read them before
// the fence, and so may write, can still be invisible when the visible
// ones are listed. Every session takes the database's connection lock
// before it reads them, so the lock's holders that pg_stat_activity
// does not show yet are watched until they show (and are judged by
// their start time) or, after startingWait, are ended unseen.
func endSessions(ctx context.Context, conn *pgx.Conn, fenced time.Time, grace time.Duration, keep int32, out io.Writer) ([]EndedSession, error) {
	deadline := time.Now().Add(grace)
	for {
		var busy int
		if err := conn.QueryRow(ctx, "SELECT count(*)::int "+beganBefore+" AND xact_start < $1", fenced, keep).Scan(&busy); err != nil {
			return nil, fmt.Errorf("list the source's sessions: %w", err)
		}
		if busy == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	var ended []EndedSession
	var visible []int32
	var pending []int32 // starting at the first look: the only ones that may have read the settings before the fence
	began := time.Now()
	for pass := 0; ; pass++ {
		// Starting first, visible next: a session that shows between the
		// two looks is in the second.
		starting, err := listStarting(ctx, conn, keep)
		if err != nil {
			return ended, err
		}
		if pass == 0 {
			pending = starting
		} else {
			pending = slices.DeleteFunc(pending, func(p int32) bool { return !slices.Contains(starting, p) })
		}
		more, err := listBeganBefore(ctx, conn, fenced, keep, visible)
		if err != nil {
			return ended, err
		}
		var late []EndedSession
		if len(pending) > 0 && time.Since(began) > startingWait {
			for _, pid := range pending {
				late = append(late, EndedSession{PID: pid, Starting: true})
			}
			pending = nil
		}
		if err := terminate(ctx, conn, append(slices.Clone(more), late...)); err != nil {
			return ended, err
		}
		for _, s := range append(slices.Clone(more), late...) {
			fmt.Fprintf(out, "fence: ended source session %s\n", s)
		}
		for _, s := range more {
			visible = append(visible, s.PID)
		}
		ended = append(append(ended, more...), late...)
		if len(pending) == 0 {
			break
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return ended, err
		}
	}
	return ended, waitGone(ctx, conn, fenced, keep, visible)
}

// beganBefore selects the client sessions of the current database that
// began before the fence ($1), other than this one and keep ($2), the
// session holding the cutover lock: sessions that began after the fence
// are read-only and left alone.
const beganBefore = `FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid()
	AND pid <> $2 AND datid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) AND backend_start < $1`

// listBeganBefore lists the sessions that began before the fence, less
// those in done (ended already).
func listBeganBefore(ctx context.Context, conn *pgx.Conn, fenced time.Time, keep int32, done []int32) ([]EndedSession, error) {
	rows, err := conn.Query(ctx, `SELECT pid, coalesce(usename::text, ''), coalesce(application_name, ''),
		coalesce(host(client_addr), 'local') `+beganBefore+` AND pid <> ALL(coalesce($3::int4[], '{}')) ORDER BY pid`, fenced, keep, done)
	var s []EndedSession
	if err == nil {
		s, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndedSession, error) {
			var s EndedSession
			return s, r.Scan(&s.PID, &s.User, &s.Application, &s.Client)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("list the source's sessions: %w", err)
	}
	return s, nil
}

// listStarting lists the processes that hold the current database's
// connection lock (taken by every session at start-up, before it reads
// the database's settings) and are not in pg_stat_activity yet.
func listStarting(ctx context.Context, conn *pgx.Conn, keep int32) ([]int32, error) {
	rows, err := conn.Query(ctx, `SELECT DISTINCT l.pid FROM pg_catalog.pg_locks l
		WHERE l.locktype = 'object' AND l.classid = 'pg_catalog.pg_database'::pg_catalog.regclass
		AND l.objid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
		AND l.pid <> pg_catalog.pg_backend_pid() AND l.pid <> $1
		AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity a WHERE a.pid = l.pid) ORDER BY 1`, keep)
	var pids []int32
	if err == nil {
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil {
		return nil, fmt.Errorf("list the source's starting sessions: %w", err)
	}
	return pids, nil
}

// terminate ends the sessions s. Listed first, ended apart: in one
// query's WHERE the server may call pg_terminate_backend before the
// other conditions.
func terminate(ctx context.Context, conn *pgx.Conn, s []EndedSession) error {
	if len(s) == 0 {
		return nil
	}
	pids := make([]int32, len(s))
	for i, e := range s {
		pids[i] = e.PID
	}
	if _, err := conn.Exec(ctx, "SELECT pg_catalog.pg_terminate_backend(p) FROM pg_catalog.unnest($1::int4[]) p", pids); err != nil {
		return fmt.Errorf("end the source's sessions (that needs superuser or pg_signal_backend): %w", err)
	}
	return nil
}

// waitGone waits until the sessions pids, ended, are gone. A session
// ended while still starting is not waited for: it ends at its first
// check for interrupts, before it runs any statement.
func waitGone(ctx context.Context, conn *pgx.Conn, fenced time.Time, keep int32, pids []int32) error {
	gone := time.Now().Add(10 * time.Second)
	for {
		var left int
		if err := conn.QueryRow(ctx, "SELECT count(*)::int "+beganBefore+" AND pid = ANY($3)", fenced, keep, pids).Scan(&left); err != nil {
			return fmt.Errorf("list the source's sessions: %w", err)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(gone) {
			return fmt.Errorf("%d source sessions still there 10s after they were terminated", left)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}
