package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A reader's COPY that waited for its table's lock behind another
// session's request for ACCESS EXCLUSIVE (ALTER, TRUNCATE, DROP, LOCK,
// VACUUM FULL) would hold up every later query on the table behind both:
// and when that request itself waited for a lock of the run (a reader's,
// or pg_dump's), PostgreSQL's deadlock detector could not see the cycle
// through the client. So readers lock with NOWAIT, and a conflict ends the
// run at once, which releases every lock and lets the DDL go.

// lockNotAvailable is SQLSTATE 55P03: NOWAIT failed, or lock_timeout or
// (for a LOCK statement) statement_timeout expired.
const lockNotAvailable = "55P03"

// IsLockNotAvailable reports whether err is PostgreSQL's lock_not_available.
func IsLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable
}

// Blocker is a session that holds or awaits ACCESS EXCLUSIVE on a table.
type Blocker struct {
	Table   string // quoted, qualified
	PID     int
	User    string
	Query   string // as pg_stat_activity shows it (hidden without pg_read_all_stats)
	Granted bool   // holds the lock, rather than waits for it
}

// LockConflictError is a table pgsprint could not lock without waiting
// behind another session, and that session when it could be found.
type LockConflictError struct {
	Table   string
	Blocker *Blocker
}

// Error says what was in the way and that pgsprint let it pass, in one
// line: the table, the session's pid, user and statement (shortened).
func (e *LockConflictError) Error() string {
	b := e.Blocker
	if b == nil {
		return fmt.Sprintf("table %s is wanted by another session for an ACCESS EXCLUSIVE lock (ALTER, TRUNCATE, DROP, LOCK or VACUUM FULL); stopped at once and released every lock so that it can go ahead: run again once it is done", e.Table)
	}
	verb := "waits for"
	if b.Granted {
		verb = "holds"
	}
	return fmt.Sprintf("table %s: session pid %d (user %q) %s an ACCESS EXCLUSIVE lock on it, running %q; stopped at once and released every lock so that it can go ahead: run again once it is done",
		b.Table, b.PID, b.User, verb, Shorten(b.Query, 80))
}

// Blocked returns a *LockConflictError for the first table of tables
// (quoted, qualified names) on which another session holds or awaits an
// ACCESS EXCLUSIVE lock, naming that session; with the table alone if
// there is none (any more) or the lookup fails. conn must not be in a
// failed transaction. pg_stat_activity is read afresh even inside a
// transaction that read it before.
func Blocked(ctx context.Context, conn *pgx.Conn, tables []string) *LockConflictError {
	e := &LockConflictError{}
	if len(tables) > 0 {
		e.Table = tables[0]
	}
	if _, err := conn.Exec(ctx, "SELECT pg_catalog.pg_stat_clear_snapshot()"); err != nil {
		return e
	}
	var b Blocker
	err := conn.QueryRow(ctx, `SELECT w.name, l.pid,
		coalesce(a.usename::text, ''), coalesce(a.query, ''), l.granted
	FROM unnest($1::text[]) WITH ORDINALITY AS w(name, i)
	JOIN pg_catalog.pg_locks l ON l.locktype = 'relation' AND l.relation = pg_catalog.to_regclass(w.name)
		AND l.mode = 'AccessExclusiveLock' AND l.pid <> pg_catalog.pg_backend_pid()
	LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
	ORDER BY l.granted DESC, w.i, a.xact_start
	LIMIT 1`, tables).Scan(&b.Table, &b.PID, &b.User, &b.Query, &b.Granted)
	if err == nil {
		e.Table, e.Blocker = b.Table, &b
	}
	return e
}

// OneLine joins the lines of a message that has several (a child's
// stderr, joined errors) with "; ": pgsprint's messages are one line.
func OneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

// Shorten collapses whitespace and cuts s to at most n characters, for a
// statement quoted in a one-line message.
func Shorten(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
