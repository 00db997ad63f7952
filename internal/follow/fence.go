package follow

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// fenceSetting is a custom setting pgsprint puts on the source database
// beside default_transaction_read_only, naming the follow (its slot)
// that fenced it: a finish or abort run again after a kill finds the
// fence in the catalog and knows it is its own to lift, while a
// read-only setting the DBA made is never lifted by pgsprint.
const fenceSetting = "pgsprint.fence"

// Fence is the source database's write fence as its catalog holds it
// (pg_db_role_setting): what new sessions get.
type Fence struct {
	Database string
	// ReadOnly is default_transaction_read_only = on for the database.
	ReadOnly bool
	// Slot is the follow named by pgsprint.fence; empty when pgsprint
	// did not set the fence.
	Slot string
}

// Ours reports whether the database is read-only through the fence of
// the follow whose slot is slot.
func (f Fence) Ours(slot string) bool { return f.ReadOnly && f.Slot == slot }

// LiftSQL is the statement that makes the source database writable again
// for new sessions, for messages.
func (f Fence) LiftSQL() string { return LiftSQL(f.Database) }

// LiftSQL is the statements that lift the fence of database db: a
// session of the fenced database is read-only itself, so it first says
// it writes. They must run one after the other, as psql sends them (not
// in one psql -c, whose string is one read-only transaction).
func LiftSQL(db string) string {
	return "SET default_transaction_read_only = off; " + resetSQL(db) + "; ALTER DATABASE " + pg.Ident(db) + " RESET " + fenceSetting
}

func resetSQL(db string) string {
	return "ALTER DATABASE " + pg.Ident(db) + " RESET default_transaction_read_only"
}

// EndedSession is a session of the source database that the fence ended.
type EndedSession struct {
	PID         int32
	User        string
	Application string
	Client      string // address, or "local" for a Unix socket
}

func (s EndedSession) String() string {
	return fmt.Sprintf("pid %d, user %s, application %q, client %s", s.PID, s.User, s.Application, s.Client)
}

// writable is cfg for a session on the source that must write (drop the
// slot and publication, lift the fence) even when the database is fenced.
func writable(cfg *pgx.ConnConfig) *pgx.ConnConfig {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["default_transaction_read_only"] = "off"
	return cfg
}

// readFence reads the fence of the connection's database.
func readFence(ctx context.Context, conn *pgx.Conn) (Fence, error) {
	var f Fence
	var config []string
	err := conn.QueryRow(ctx, `SELECT pg_catalog.current_database()::text, coalesce((SELECT s.setconfig FROM pg_catalog.pg_db_role_setting s
		WHERE s.setrole = 0 AND s.setdatabase = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())), '{}')`).Scan(&f.Database, &config)
	if err != nil {
		return f, fmt.Errorf("read the source database's settings: %w", err)
	}
	for _, c := range config {
		name, value, _ := strings.Cut(c, "=")
		switch strings.ToLower(name) {
		case "default_transaction_read_only":
			switch strings.ToLower(value) {
			case "on", "true", "yes", "1", "t", "y":
				f.ReadOnly = true
			}
		case fenceSetting:
			f.Slot = value
		}
	}
	return f, nil
}

// setFence makes the source database read-only for new sessions, marked
// as slot's fence, in one transaction.
func setFence(ctx context.Context, conn *pgx.Conn, db, slot string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []string{
			"ALTER DATABASE " + pg.Ident(db) + " SET " + fenceSetting + " = " + pg.Literal(slot),
			"ALTER DATABASE " + pg.Ident(db) + " SET default_transaction_read_only = on",
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("fence the source (%s; that needs the database's owner or a superuser, or stop the writes yourself and use --no-fence): %w", q, err)
			}
		}
		return nil
	})
}

// unfence lifts the fence: new sessions may write again.
func unfence(ctx context.Context, conn *pgx.Conn, db string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []string{
			resetSQL(db),
			"ALTER DATABASE " + pg.Ident(db) + " RESET " + fenceSetting,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("lift the source's fence (%s): %w", q, err)
			}
		}
		return nil
	})
}

// endSessions ends the sessions of the source database that began
// before the fence, which may still write: it waits up to grace for the
// transactions under way at the fence to end (a busy session starts new
// ones all the time: those are not waited for), then terminates every
// such session (idle ones too: their next transaction could write) and
// waits until they are gone. Each is written to out.
func endSessions(ctx context.Context, conn *pgx.Conn, fenced time.Time, grace time.Duration, keep int32, out io.Writer) ([]EndedSession, error) {
	// Sessions that began after the fence are read-only: left alone;
	// so is keep, the session holding the cutover lock ($2).
	const others = `FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid()
		AND pid <> $2 AND datid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) AND backend_start < $1`
	deadline := time.Now().Add(grace)
	for {
		var busy int
		if err := conn.QueryRow(ctx, "SELECT count(*)::int "+others+" AND xact_start < $1", fenced, keep).Scan(&busy); err != nil {
			return nil, fmt.Errorf("list the source's sessions: %w", err)
		}
		if busy == 0 || time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	rows, err := conn.Query(ctx, `SELECT pid, coalesce(usename::text, ''), coalesce(application_name, ''),
		coalesce(host(client_addr), 'local') `+others+` ORDER BY pid`, fenced, keep)
	var ended []EndedSession
	if err == nil {
		ended, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (EndedSession, error) {
			var s EndedSession
			return s, r.Scan(&s.PID, &s.User, &s.Application, &s.Client)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("list the source's sessions: %w", err)
	}
	pids := make([]int32, len(ended))
	for i, s := range ended {
		pids[i] = s.PID
	}
	// Listed first, ended apart: in one query's WHERE the server may
	// call pg_terminate_backend before the other conditions.
	if _, err := conn.Exec(ctx, "SELECT pg_catalog.pg_terminate_backend(p) FROM pg_catalog.unnest($1::int4[]) p", pids); err != nil {
		return nil, fmt.Errorf("end the source's sessions (that needs superuser or pg_signal_backend): %w", err)
	}
	for _, s := range ended {
		fmt.Fprintf(out, "fence: ended source session %s\n", s)
	}
	gone := time.Now().Add(10 * time.Second)
	for {
		var left int
		if err := conn.QueryRow(ctx, "SELECT count(*)::int "+others+" AND pid = ANY($3)", fenced, keep, pids).Scan(&left); err != nil {
			return ended, fmt.Errorf("list the source's sessions: %w", err)
		}
		if left == 0 {
			return ended, nil
		}
		if time.Now().After(gone) {
			return ended, fmt.Errorf("%d source sessions still there 10s after they were terminated", left)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return ended, err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
