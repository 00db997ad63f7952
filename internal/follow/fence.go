package follow

import (
	"context"
	"fmt"
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
	// Starting is a session ended while still starting, unseen in
	// pg_stat_activity: only its PID is known.
	Starting bool
}

func (s EndedSession) String() string {
	if s.Starting {
		return fmt.Sprintf("pid %d, still starting %s after the fence", s.PID, startingWait)
	}
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

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
