package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// step is what a whole-server restore or clone does with one database of
// the target.
type step int

const (
	// createDB creates the database (postgres, which every server has, is
	// restored into).
	createDB step = iota
	// replaceDB drops what the target has under the database's name just
	// before creating it again (pg_restore --clean --create; for
	// postgres, the archive's objects are dropped instead).
	replaceDB
	// resumeDB finishes the database from its own journal.
	resumeDB
)

// step decides what to do with database name: exists says the target had
// it when the run began, begun that an interrupted run of the server
// journal began it (journal.Cluster.Begin), so that what the target holds
// under its name is that run's; clean that the run replaces the target's
// databases (--clean, now or in the interrupted run).
func (b *build) step(ctx context.Context, name string, exists, begun, clean bool) (step, error) {
	switch {
	case !exists:
		// Never there, or dropped by a killed run before it could
		// create it again.
		return createDB, nil
	case begun:
		if b.resumable {
			cfg := b.target.Copy()
			cfg.Database = name
			found, err := journal.Exists(ctx, cfg)
			if err != nil {
				return 0, fmt.Errorf("database %s: %w", pg.Ident(name), err)
			}
			if found {
				return resumeDB, nil
			}
		}
		// The run's own, unfinished: drop it and start again.
		return replaceDB, nil
	case clean:
		return replaceDB, nil
	case name == "postgres":
		return createDB, nil
	}
	return 0, fmt.Errorf("the target server has a database %q that the interrupted %s did not create: drop it, or start over with --clean", name, b.verb)
}

// checkRecreate refuses, before anything is dropped or changed, a run that
// would drop databases of the target (--clean, or a resume replacing what
// an interrupted run left) it could not create again: the user may not
// create databases, or, unless the run sets no owner, a database's owner
// is missing on the target (and the globals, script, do not create it) or
// is a role the user cannot become (ALTER DATABASE ... OWNER TO, which
// pg_restore --create runs, would fail once the database is gone). j is
// the server journal of the run being resumed, nil for a fresh run.
func (b *build) checkRecreate(ctx context.Context, conn *pgx.Conn, j *journal.Cluster, existing map[string]bool, clean bool, script string) error {
	done := map[string]bool{}
	var drops []int
	if j != nil {
		for _, d := range j.Done {
			done[d] = true
		}
	}
	for i, d := range b.dbs {
		if d.Name != "postgres" && !done[d.Name] && existing[d.Name] && (clean || j.HasBegun(d.Name)) {
			drops = append(drops, i)
		}
	}
	if len(drops) == 0 {
		return nil
	}
	var user string
	var super, createdb bool
	var version int
	if err := conn.QueryRow(ctx, `SELECT rolname, rolsuper, rolcreatedb, pg_catalog.current_setting('server_version_num')::int
		FROM pg_catalog.pg_roles WHERE rolname = current_user`).Scan(&user, &super, &createdb, &version); err != nil {
		return fmt.Errorf("read the target user's privileges: %w", err)
	}
	refuse := func(db, why string) error {
		return fmt.Errorf("%s would drop database %q on the target but could not create it again: %s; nothing was dropped", b.verb, db, why)
	}
	if !super && !createdb {
		return refuse(b.dbs[drops[0]].Name, fmt.Sprintf("role %q may not create databases (CREATEDB)", user))
	}
	if b.noOwner {
		return nil
	}
	created := map[string]bool{} // roles the globals create
	if script != "" {
		roles, _, err := GlobalsObjects(script)
		if err != nil {
			return err
		}
		for _, r := range roles {
			created[r] = true
		}
	}
	// Becoming a role: SET ROLE to it from 16 on, membership before.
	become := "MEMBER"
	if version >= 160000 {
		become = "SET"
	}
	for _, i := range drops {
		d := b.dbs[i]
		if d.Owner == "" || d.Owner == user {
			continue // an archive that does not say, or the user's own
		}
		var found, can bool
		if err := conn.QueryRow(ctx, `SELECT true, pg_catalog.pg_has_role(current_user, oid, $2) FROM pg_catalog.pg_roles WHERE rolname = $1`,
			d.Owner, become).Scan(&found, &can); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("look up role %s on the target: %w", pg.Ident(d.Owner), err)
		}
		switch {
		case found && (super || can):
		case found:
			return refuse(d.Name, fmt.Sprintf("its owner %q is a role %q cannot become (grant it membership, or use --no-owner)", d.Owner, user))
		case super && created[d.Owner]:
		case super:
			return refuse(d.Name, fmt.Sprintf("its owner %q does not exist on the target (create that role, or use --no-owner)", d.Owner))
		default:
			return refuse(d.Name, fmt.Sprintf("its owner %q does not exist on the target, and role %q, not a superuser, could not own a database by it once created (create that role and grant it to %q, or use --no-owner)", d.Owner, user, user))
		}
	}
	return nil
}
