package follow

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// logTail is how much of the end of the target's server log is read for
// the apply worker's last error.
const logTail = 256 << 10

// lastApplyError returns the last error a logical replication apply
// worker logged in the target's server log, "" when there is none or the
// log cannot be read: PostgreSQL keeps the text of an apply error only
// in its log (pg_stat_subscription_stats counts them). Reading it needs
// the logging collector (pg_current_logfile) and superuser or
// pg_read_server_files on the target.
func lastApplyError(ctx context.Context, conn *pgx.Conn) string {
	var text *string
	// Errors (no privilege, no collector) read as no log: the caller
	// says where else the error is.
	_ = conn.QueryRow(ctx, `SELECT pg_catalog.pg_read_file(f, greatest((pg_catalog.pg_stat_file(f)).size - $1, 0), $1)
		FROM pg_catalog.pg_current_logfile() f WHERE f IS NOT NULL`, int64(logTail)).Scan(&text)
	if text == nil {
		return ""
	}
	return findApplyError(*text)
}

// findApplyError finds, in the text of a server log (stderr format, any
// log_line_prefix), the last ERROR an apply worker logged: the one
// followed within a few lines by the apply's CONTEXT ("processing remote
// data ...") or by the worker's exit.
func findApplyError(log string) string {
	var last, found string
	since := 0
	for _, line := range strings.Split(log, "\n") {
		since++
		if i := strings.Index(line, "ERROR:  "); i >= 0 {
			last, since = strings.TrimSpace(line[i+len("ERROR:  "):]), 0
			continue
		}
		if last != "" && since <= 4 && (strings.Contains(line, "processing remote data") ||
			strings.Contains(line, `"logical replication`) && strings.Contains(line, "exited with exit code")) {
			found = last
		}
	}
	return found
}
