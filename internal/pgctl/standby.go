package pgctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// StartStandby makes a base backup of c with pg_basebackup -R (which writes
// primary_conninfo and standby.signal) and starts it as a hot standby on
// its own port. The caller must Close it.
func (c *Instance) StartStandby(ctx context.Context) (*Instance, error) {
	s, err := newCluster(c.binDir, filepath.Dir(c.dir))
	if err != nil {
		return nil, err
	}
	err = s.run(ctx, filepath.Join(c.binDir, "pg_basebackup"),
		"-D", s.dataDir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync",
		"-d", KeywordConnString(map[string]string{"host": c.sockDir, "port": strconv.Itoa(c.port), "user": SuperuserName}))
	if err == nil {
		err = s.startCopy(ctx, c)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("pgctl: standby of port %d: %w", c.port, err), s.Close())
	}
	return s, nil
}

// startCopy starts a data directory copied from primary on a port of its own.
func (s *Instance) startCopy(ctx context.Context, primary *Instance) error {
	s.version = primary.version
	// The copied postmaster.opts and pid file belong to the primary.
	for _, f := range []string{"postmaster.pid", "postmaster.opts"} {
		if err := os.Remove(filepath.Join(s.dataDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pgctl: removing copied %s: %w", f, err)
		}
	}
	// hot_standby_feedback keeps the primary from vacuuming away rows that a
	// long dump on the standby still reads, which would cancel it.
	return s.listenAndStart(ctx, map[string]string{"hot_standby": "on", "hot_standby_feedback": "on"}, false)
}

// WaitReplayed waits until standby has replayed everything c had inserted
// into its WAL when WaitReplayed was called, so that a test knows what the
// standby sees. The insert position, not the write position: with
// synchronous_commit off, a commit can be inserted and not yet written.
func (c *Instance) WaitReplayed(ctx context.Context, standby *Instance) error {
	var target string
	if err := c.queryRow(ctx, "SELECT pg_catalog.pg_current_wal_insert_lsn()::text", &target); err != nil {
		return fmt.Errorf("pgctl: reading primary's WAL position: %w", err)
	}
	for {
		var done bool
		err := standby.queryRow(ctx, "SELECT pg_catalog.pg_last_wal_replay_lsn() >= "+pg.Literal(target)+"::pg_lsn", &done)
		if err != nil {
			return fmt.Errorf("pgctl: reading standby's replay position: %w", err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgctl: standby did not replay up to %s: %w", target, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CopyRoles creates on dst every role of c that dst lacks, with the same
// attributes, as restoring `pg_dumpall --roles-only` would. Roles are
// cluster-wide, so a database restored into another cluster needs its
// owners and grantees first. The bootstrap superuser and the predefined
// pg_* roles are left out; memberships and passwords are not copied.
func (c *Instance) CopyRoles(ctx context.Context, dst *Instance) error {
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		return fmt.Errorf("pgctl: connecting to copy roles: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var stmts []string
	rows, err := conn.Query(ctx, `SELECT rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb,
		rolcanlogin, rolreplication, rolbypassrls
		FROM pg_catalog.pg_roles WHERE rolname !~ '^pg_' AND oid <> 10 ORDER BY rolname`)
	if err != nil {
		return fmt.Errorf("pgctl: listing roles: %w", err)
	}
	for rows.Next() {
		var name string
		var attrs [7]bool
		if err := rows.Scan(&name, &attrs[0], &attrs[1], &attrs[2], &attrs[3], &attrs[4], &attrs[5], &attrs[6]); err != nil {
			rows.Close()
			return fmt.Errorf("pgctl: listing roles: %w", err)
		}
		words := []string{"SUPERUSER", "INHERIT", "CREATEROLE", "CREATEDB", "LOGIN", "REPLICATION", "BYPASSRLS"}
		opts := make([]string, len(words))
		for i, w := range words {
			opts[i] = w
			if !attrs[i] {
				opts[i] = "NO" + w
			}
		}
		// A DO block, so that a role dst already has is left alone.
		stmts = append(stmts, "DO "+pg.Literal(fmt.Sprintf(
			"BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s) THEN CREATE ROLE %s %s; END IF; END",
			pg.Literal(name), pg.Ident(name), strings.Join(opts, " "))))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgctl: listing roles: %w", err)
	}
	if len(stmts) == 0 {
		return nil
	}
	return dst.Exec(ctx, "postgres", strings.Join(stmts, ";\n"))
}

// queryRow runs a one-row query in database postgres and scans it into dest.
func (c *Instance) queryRow(ctx context.Context, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql).Scan(dest...)
}
