package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// This file is the journal's second level: a whole-cluster restore or
// clone (--all) records which databases it finished, cluster-wide, beside
// each database's own journal (the steps table above).

// ClusterRole is the cluster-wide journal of a whole-cluster restore or
// clone: a role (roles are shared by every database, and transactional)
// created in the globals' transaction, whose comment records what is
// restored and the databases finished, dropped when the run is complete.
const ClusterRole = "pgsprint_restore_journal"

// Cluster is ClusterRole's comment.
type Cluster struct {
	Archive string   `json:"archive"` // what is restored: the archive's (or the clone's source's) identity
	Done    []string `json:"done"`    // the databases finished
	// Begun names the databases the run began: each is recorded here
	// before the run drops (--clean) or creates it, so that whatever the
	// target holds under that name is this run's, and a resume recreates
	// one that a killed run dropped but had not created again.
	Begun []string `json:"begun,omitempty"`
	// Clean says the run replaces the target's databases of the same
	// names (--clean): a resume replaces those it had not begun as well.
	Clean bool `json:"clean,omitempty"`
}

// ReadCluster reads the cluster journal over conn, or nil when there is none.
func ReadCluster(ctx context.Context, conn *pgx.Conn) (*Cluster, error) {
	var text *string
	err := conn.QueryRow(ctx, `SELECT pg_catalog.shobj_description(oid, 'pg_authid') FROM pg_catalog.pg_roles WHERE rolname = $1`, ClusterRole).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the whole-server restore's journal: %w", err)
	}
	j := &Cluster{}
	if text == nil || json.Unmarshal([]byte(*text), j) != nil {
		return nil, fmt.Errorf("role %s exists on the target but is not a pgsprint journal: drop it, or restore into another server", ClusterRole)
	}
	return j, nil
}

// CreateCluster creates the cluster journal for archive in tx (the
// globals' transaction); clean says the run replaces the target's
// databases (--clean).
func CreateCluster(ctx context.Context, tx pgx.Tx, archive string, clean bool) (*Cluster, error) {
	if _, err := tx.Exec(ctx, "CREATE ROLE "+pg.Ident(ClusterRole)+" NOLOGIN"); err != nil {
		return nil, fmt.Errorf("create the whole-server restore's journal (role %s): %w", ClusterRole, err)
	}
	j := &Cluster{Archive: archive, Clean: clean}
	return j, j.write(ctx, tx)
}

// Begin records, before database is dropped or created, that the run has
// begun it: the drop and the create that follow are one step, which a
// resume finishes (HasBegun). Recording a database twice records it once.
func (j *Cluster) Begin(ctx context.Context, x Execer, database string) error {
	if j.HasBegun(database) {
		return nil
	}
	j.Begun = append(j.Begun, database)
	return j.write(ctx, x)
}

// HasBegun says whether a run of this journal began database (Begin):
// what the target holds under its name, if anything, is that run's. A nil
// journal (a fresh run) began none.
func (j *Cluster) HasBegun(database string) bool {
	return j != nil && slices.Contains(j.Begun, database)
}

// Finish records database as finished.
func (j *Cluster) Finish(ctx context.Context, x Execer, database string) error {
	j.Done = append(j.Done, database)
	return j.write(ctx, x)
}

// write records j in ClusterRole's comment.
func (j *Cluster) write(ctx context.Context, x Execer) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	if _, err := x.Exec(ctx, "COMMENT ON ROLE "+pg.Ident(ClusterRole)+" IS "+pg.Literal(string(b))); err != nil {
		return fmt.Errorf("record the whole-server restore's progress: %w", err)
	}
	return nil
}

// DiscardCluster drops a cluster journal, if any: an earlier run's, which a
// run starting over (--clean) replaces.
func DiscardCluster(ctx context.Context, x Execer) error {
	if _, err := x.Exec(ctx, "DROP ROLE IF EXISTS "+pg.Ident(ClusterRole)); err != nil {
		return fmt.Errorf("drop the journal of an earlier whole-server restore: %w", err)
	}
	return nil
}

// DropCluster drops the cluster journal of a finished run.
func DropCluster(ctx context.Context, x Execer) error {
	if _, err := x.Exec(ctx, "DROP ROLE "+pg.Ident(ClusterRole)); err != nil {
		return fmt.Errorf("drop the whole-server restore's journal (role %s): %w", ClusterRole, err)
	}
	return nil
}

// Exists says whether the database cfg names holds a journal (Schema).
func Exists(ctx context.Context, cfg *pgx.ConnConfig) (bool, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var found bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", Schema).Scan(&found); err != nil {
		return false, fmt.Errorf("look for a restore journal: %w", err)
	}
	return found, nil
}

// Scope is where WaitForOrphans looks for an interrupted run's sessions.
type Scope int

// The scopes of WaitForOrphans.
const (
	ThisDatabase Scope = iota // conn's database: a one-database restore or clone
	WholeCluster              // every database: a whole-cluster one, which creates databases
)

// WaitForOrphans waits until no session of an interrupted run is busy in
// the target (conn's database, or every database of its server): a killed
// pgsprint's server backends, and those of its pg_restore and psql
// children, finish their last statement (a CREATE INDEX, a CREATE
// DATABASE can take minutes) before they notice their client is gone,
// holding locks until then, and a resumed run must not race them. It
// gives up after 10 minutes.
func WaitForOrphans(ctx context.Context, conn *pgx.Conn, scope Scope, log *slog.Logger) error {
	where := "datname = pg_catalog.current_database()"
	if scope == WholeCluster {
		where = "datname IS NOT NULL"
	}
	q := `SELECT count(*) FROM pg_catalog.pg_stat_activity
		WHERE ` + where + ` AND pid <> pg_catalog.pg_backend_pid()
		AND application_name IN ('pgsprint', 'pg_restore', 'psql') AND state IS DISTINCT FROM 'idle'`
	deadline := time.Now().Add(10 * time.Minute)
	for logged := false; ; logged = true {
		var n int
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("look for sessions of the interrupted restore: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("sessions of the interrupted restore (or another pgsprint) are still busy on the target after 10 minutes; is another restore running?")
		}
		if !logged && log != nil {
			log.Info("waiting for sessions of the interrupted restore to end", "sessions", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
