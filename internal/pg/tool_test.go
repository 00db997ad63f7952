package pg

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestToolError: a child's stderr comes down to its telling line, and a
// lost server is said to be one.
func TestToolError(t *testing.T) {
	exit := errors.New("exit status 1")
	for _, tc := range []struct{ stderr, want string }{
		{"pg_restore: warning: x\npg_restore: error: could not execute query: ERROR:  boom\n", "could not execute query: ERROR:  boom"},
		{"pg_restore: error: could not execute query: ERROR:  must be member of role \"postgres\"\nCommand was: ALTER TABLE public.t\n    OWNER TO postgres;\n\n\npg_restore: warning: errors ignored on restore: 1\n",
			"could not execute query: ERROR:  must be member of role \"postgres\" (statement: ALTER TABLE public.t OWNER TO postgres;)"},
		{"", "exit status 1"},
		{"pg_dump: error: query failed: ERROR:  out of shared memory\nHINT:  You might need to increase max_locks_per_transaction.\npg_dump: detail: Query was: LOCK TABLE public.t1 IN ACCESS SHARE MODE\n",
			"query failed: ERROR:  out of shared memory; You might need to increase max_locks_per_transaction."},
		{"something odd\n", "something odd"},
		{"WARNING:  there is already a transaction in progress\nERROR:  insert or update on table \"u\" violates foreign key constraint \"u_t_fkey\"\nDETAIL:  Key (t)=(1) is not present in table \"t\".\n",
			"ERROR:  insert or update on table \"u\" violates foreign key constraint \"u_t_fkey\"; Key (t)=(1) is not present in table \"t\"."},
		{"psql:<stdin>:31: ERROR:  insert or update on table \"u\" violates foreign key constraint \"u_t_fkey\"\nDETAIL:  Key (t)=(1) is not present in table \"t\".\n",
			"ERROR:  insert or update on table \"u\" violates foreign key constraint \"u_t_fkey\"; Key (t)=(1) is not present in table \"t\"."},
		{"pg_dump: error: connection to server on socket \"/s/.s.PGSQL.5432\" failed: server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n",
			"lost the connection to the server (it restarted or the session was terminated): connection to server on socket \"/s/.s.PGSQL.5432\" failed: server closed the connection unexpectedly"},
		{"pg_dump: error: Dumping the contents of table \"t\" failed: FATAL:  terminating connection due to administrator command\n",
			"lost the connection to the server (it restarted or the session was terminated): Dumping the contents of table \"t\" failed: FATAL:  terminating connection due to administrator command"},
	} {
		if got := ToolError([]byte(tc.stderr), exit); got != tc.want {
			t.Errorf("ToolError(%q) = %q, want %q", tc.stderr, got, tc.want)
		}
	}
}

// TestExplainLost: however a lost connection shows (EOF, a broken pipe on
// write, a reset, the server's FATAL), the message says what happened.
func TestExplainLost(t *testing.T) {
	for _, err := range []error{
		io.ErrUnexpectedEOF,
		fmt.Errorf("write failed: %w", &net.OpError{Op: "write", Net: "unix", Err: os.NewSyscallError("write", syscall.EPIPE)}),
		fmt.Errorf("read failed: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}),
		&pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"},
	} {
		if got := ExplainLost(err).Error(); !strings.Contains(got, "restart") {
			t.Errorf("ExplainLost(%v) = %q", err, got)
		}
	}
	if other := errors.New("syntax error"); ExplainLost(other) != other {
		t.Error("an unrelated error was changed")
	}
}

// TestStderrBuffer: a child's stderr is kept whole while short; a long one
// keeps its beginning and its last lines, from a whole line, marked where
// bytes were dropped, and never more than twice stderrKeep.
func TestStderrBuffer(t *testing.T) {
	verbose := strings.Repeat("pg_restore: creating INDEX \"public.small_000001_label_idx\"\n", 5000)
	for _, tc := range []struct {
		name   string
		writes []string
		want   func(string) bool
	}{
		{"short", []string{"pg_restore: error: could not connect\n"},
			func(s string) bool { return s == "pg_restore: error: could not connect\n" }},
		{"error first, chatter after", []string{"pg_restore: error: bad\n", verbose},
			func(s string) bool {
				return strings.HasPrefix(s, "pg_restore: error: bad\n") && strings.Contains(s, "\n[...]\npg_restore: creating")
			}},
		{"error last", []string{verbose, "pg_restore: error: could not execute query\n"},
			func(s string) bool { return strings.HasSuffix(s, "\npg_restore: error: could not execute query\n") }},
		{"one byte at a time", strings.Split(verbose[:3*stderrKeep], ""),
			func(s string) bool { return strings.Contains(s, "[...]") && len(s) <= 2*stderrKeep+8 }},
	} {
		var b StderrBuffer
		for _, w := range tc.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("%s: Write = %d, %v", tc.name, n, err)
			}
		}
		if len(b.head)+len(b.tail) > 3*stderrKeep {
			t.Errorf("%s: holds %d bytes", tc.name, len(b.head)+len(b.tail))
		}
		if got := string(b.Bytes()); !tc.want(got) {
			t.Errorf("%s: kept %d bytes: %.200q ... %.200q", tc.name, len(got), got, got[max(0, len(got)-200):])
		}
	}
}

// TestToolFailure: a program that exits non-zero after saying why (as
// pg_restore --list of an archive its version cannot read) reaches the user
// with its words, not Go's "exit status 1"; the exit stays reachable, and
// a failure without words (or another error) is left as it is.
func TestToolFailure(t *testing.T) {
	for _, tc := range []struct{ script, want string }{
		{`echo "pg_restore: error: unsupported version (1.16) in file header" >&2; exit 1`, "unsupported version (1.16) in file header"},
		{`exit 2`, "exit status 2"},
	} {
		_, err := exec.Command("sh", "-c", tc.script).Output()
		got := ToolFailure(err)
		if got.Error() != tc.want {
			t.Errorf("%s: %q, want %q", tc.script, got, tc.want)
		}
		var exit *exec.ExitError
		if !errors.As(got, &exit) {
			t.Errorf("%s: the *exec.ExitError is no longer reachable", tc.script)
		}
	}
	if err := errors.New("other"); ToolFailure(err) != err {
		t.Error("another error was changed")
	}
}
