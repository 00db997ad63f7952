package follow

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// logTail is how much of the end of the target's server log is read for
// the apply worker's last error.
const logTail = 256 << 10

// lastApplyError returns the last error the apply worker of the
// subscription whose replication origin is origin ("pg_" and its OID)
// logged in the target's server log, "" when there is none or the log
// cannot be read: PostgreSQL keeps the text of an apply error only in its
// log (pg_stat_subscription_stats counts them). Reading it needs the
// logging collector (pg_current_logfile) and superuser or
// pg_read_server_files on the target.
func lastApplyError(ctx context.Context, conn *pgx.Conn, origin string) string {
	var text *string
	// Errors (no privilege, no collector) read as no log: the caller
	// says where else the error is.
	_ = conn.QueryRow(ctx, `SELECT pg_catalog.pg_read_file(f, greatest((pg_catalog.pg_stat_file(f)).size - $1, 0), $1)
		FROM pg_catalog.pg_current_logfile() f WHERE f IS NOT NULL`, int64(logTail)).Scan(&text)
	if text == nil {
		return ""
	}
	return findApplyError(*text, origin)
}

// findApplyError finds, in the text of a server log (stderr format, any
// log_line_prefix), the last ERROR the apply worker of origin logged: the
// one followed within a few lines by the apply's CONTEXT naming origin
// ("processing remote data for replication origin ..."), or else the last
// followed by an apply worker's exit and by no CONTEXT naming another
// origin: a target may hold other subscriptions, whose errors are not
// this one's.
func findApplyError(log, origin string) string {
	var last, own, exited string
	since, foreign := 0, false
	for _, line := range strings.Split(log, "\n") {
		since++
		if i := strings.Index(line, "ERROR:  "); i >= 0 {
			last, since, foreign = strings.TrimSpace(line[i+len("ERROR:  "):]), 0, false
			continue
		}
		if last == "" || since > 4 {
			continue
		}
		switch {
		case strings.Contains(line, "processing remote data"):
			if strings.Contains(line, `replication origin "`+origin+`"`) {
				own = last
			} else {
				foreign = true
			}
		case strings.Contains(line, `"logical replication`) && strings.Contains(line, "exited with exit code") && !foreign:
			exited = last
		}
	}
	if own != "" {
		return own
	}
	return exited
}

// ApplyErrorAdvice names an action that works against the apply worker's
// last error (its text as the target's log gave it, "" when unknown):
// "fix what it fails on" helps nobody on the day of a cutover. The
// worker retries the same transaction until it succeeds, so what removes
// the cause lets it go on; what cannot be removed on the target means
// the target no longer follows the source, and only a new clone does.
func ApplyErrorAdvice(text string) string {
	const again = "pgsprint follow abort, then clone again"
	switch {
	case strings.Contains(text, "duplicate key value violates unique constraint"):
		return "a row the source inserts is already on the target (written there): delete that row on the target (its key is in the error) and the worker goes on by itself; or " + again
	case strings.Contains(text, "could not connect to the publisher"), strings.Contains(text, "could not receive data from WAL stream"):
		return "the target cannot reach the source: let it connect (the source's pg_hba.conf, the host in --follow-conninfo), and the worker retries by itself"
	case strings.Contains(text, "permission denied"), strings.Contains(text, "must be superuser"):
		return "the subscription's owner may not apply a change on the target: grant it the right named (or make it the tables' owner), and the worker retries by itself"
	case strings.Contains(text, "cannot run inside a transaction block"), strings.Contains(text, "does not exist"),
		strings.Contains(text, "already exists"), strings.Contains(text, "pgsprint"):
		return "the target's schema no longer follows the source's (DDL it could not replay, or run on the target): " + again
	}
	return again + " (the target's server log says why the worker fails)"
}
