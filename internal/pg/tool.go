package pg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// ToolFailure is err with, for a client program that exited non-zero
// with something on its standard error (exec.Cmd.Output keeps it), the
// program's most telling line (ToolError) in place of Go's "exit status 1",
// which names no cause. Any other error is returned as it is; the result
// still unwraps to err.
func ToolFailure(err error) error {
	var exit *exec.ExitError
	if !errors.As(err, &exit) || len(bytes.TrimSpace(exit.Stderr)) == 0 {
		return err
	}
	return &toolFailure{msg: ToolError(exit.Stderr, err), err: err}
}

// toolFailure is ToolFailure's error: the program's words, the exit kept.
type toolFailure struct {
	msg string
	err error
}

func (e *toolFailure) Error() string { return e.msg }
func (e *toolFailure) Unwrap() error { return e.err }

// ToolError reduces a client program's stderr to its most telling line, so
// that a failed pg_dump or pg_restore reaches the user as one line. The
// program's own "pg_restore: error: " prefix is dropped (the caller names
// the program), and the statement pg_restore says failed ("Command was:")
// follows, shortened.
func ToolError(stderr []byte, err error) string {
	line := err.Error()
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		line = last
	}
	for i, l := range lines {
		if strings.Contains(l, "error:") || isPsqlError(l) {
			line = strings.TrimSpace(psqlLocation(l))
			// The server's detail (the key a foreign key misses) and its
			// hint, often the remedy ("out of shared memory": increase
			// max_locks_per_transaction), follow on lines of their own.
			rest := lines[i+1:]
			for len(rest) > 0 {
				more, ok := strings.CutPrefix(strings.TrimSpace(rest[0]), "HINT:")
				if !ok {
					more, ok = strings.CutPrefix(strings.TrimSpace(rest[0]), "DETAIL:")
				}
				if !ok {
					break
				}
				line += "; " + strings.TrimSpace(more)
				rest = rest[1:]
			}
			if stmt := failedCommand(rest); stmt != "" {
				line += " (statement: " + stmt + ")"
			}
			break
		}
	}
	line = stripToolPrefix(line)
	// A child that lost its server says so in libpq's words; say what it
	// means, as ExplainLost does for pgsprint's own connections.
	for _, lost := range []string{"server closed the connection unexpectedly", "terminating connection due to administrator command",
		"the database system is shutting down", "the database system is starting up", "no connection to the server"} {
		if strings.Contains(string(stderr), lost) {
			return "lost the connection to the server (it restarted or the session was terminated): " + line
		}
	}
	return line
}

// isPsqlError reports whether l is psql's report of a server error in a
// script ("ERROR:  ...", or "psql:FILE:12: ERROR:  ..." for a file), which
// says ERROR where client programs say "error:".
func isPsqlError(l string) bool {
	return strings.HasPrefix(l, "ERROR:  ") || strings.HasPrefix(l, "psql:") && strings.Contains(l, ": ERROR:  ")
}

// psqlLocation drops the script location psql may put before a server's
// message ("psql:FILE:12: "): it names a line of pgsprint's own script.
func psqlLocation(l string) string {
	if !strings.HasPrefix(l, "psql:") || !isPsqlError(l) {
		return l
	}
	_, rest, _ := strings.Cut(l, ": ")
	return rest
}

// toolPrefixes are what client programs start their messages with.
var toolPrefixes = []string{"pg_restore: ", "pg_dump: ", "pg_dumpall: ", "psql: ", "error: "}

// stripToolPrefix drops the program name and "error: " from a message.
func stripToolPrefix(line string) string {
	for _, p := range toolPrefixes {
		line = strings.TrimPrefix(line, p)
	}
	return line
}

// maxStatement is how much of a failed statement an error shows.
const maxStatement = 160

// failedCommand returns the statement of pg_restore's "Command was:"
// lines, which follow its error, on one shortened line.
func failedCommand(lines []string) string {
	var stmt []string
	for i, l := range lines {
		if i == 0 {
			rest, ok := strings.CutPrefix(l, "Command was: ")
			if !ok {
				return ""
			}
			l = rest
		} else if strings.HasPrefix(l, "pg_restore: ") || strings.HasPrefix(l, "pg_dump: ") {
			break
		}
		stmt = append(stmt, strings.Fields(l)...)
	}
	s := strings.Join(stmt, " ")
	if r := []rune(s); len(r) > maxStatement {
		s = string(r[:maxStatement]) + "..."
	}
	return s
}

// ExplainLost turns the bare EOF, broken pipe or reset that a dropped
// connection produces (the server restarted, or the session was
// terminated), and the FATAL a server
// sends its sessions when it shuts down or restarts, into an error that
// says so; other errors pass through unchanged. The server's "terminating
// connection due to administrator command" is the same for a fast shutdown
// (pg_ctl restart -m fast) and for pg_terminate_backend, so the message
// names both. An error that PostgreSQL sends with a hint that is its remedy
// ("out of shared memory": increase max_locks_per_transaction) keeps it.
func ExplainLost(err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("lost the connection to the server (it restarted or the session was terminated): %w", err)
	case errors.As(err, &pgErr) && (pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"):
		// admin_shutdown, crash_shutdown, cannot_connect_now
		return fmt.Errorf("the server ended the session (it is shutting down or restarting, or the session was terminated): %w", err)
	case errors.As(err, &pgErr) && pgErr.Code == "53200" && pgErr.Hint != "":
		// out_of_memory, "out of shared memory" above all: its hint
		// (increase max_locks_per_transaction) is the remedy.
		return fmt.Errorf("%w; %s", err, pgErr.Hint)
	}
	return err
}

// stderrKeep is how much of each end of a child program's stderr an
// StderrBuffer keeps.
const stderrKeep = 32 << 10

// StderrBuffer keeps the beginning and the end of a child program's
// standard error, for ToolError: pg_restore --verbose writes a line per
// entry there (16 MB at 100,000 tables, held for as long as it runs), and
// what tells why it failed is its first error or its last lines.
type StderrBuffer struct {
	head, tail []byte
	cut        bool // bytes were dropped between head and tail
}

// Write keeps p's bytes within the first and the last stderrKeep bytes
// written; it never fails.
func (b *StderrBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := stderrKeep - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.tail = append(b.tail, p...)
	if over := len(b.tail) - stderrKeep; over > stderrKeep {
		// Drop the front only once it is as long again as what is kept:
		// each byte is copied a bounded number of times.
		b.tail = append(b.tail[:0], b.tail[over:]...)
		b.cut = true
	}
	return n, nil
}

// Bytes returns what was kept, a line saying so where bytes were dropped.
func (b *StderrBuffer) Bytes() []byte {
	tail, cut := b.tail, b.cut
	if over := len(tail) - stderrKeep; over > 0 {
		tail, cut = tail[over:], true
	}
	out := slices.Clip(b.head)
	if !cut {
		return append(out, tail...)
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 {
		tail = tail[i+1:] // from a whole line
	}
	return append(append(out, "\n[...]\n"...), tail...)
}
