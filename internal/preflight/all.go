package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// This file holds the checks of a whole-server run (dump, restore and
// clone --all): the one-database checks for every selected database, each
// line named after its database, and the server's own (the databases
// chosen, the server journal, the roles, the right to create databases).

// ListFunc lists, through conn (the source's first connection), the
// databases a whole-server run would read, and those it would skip with
// the reason, as the run chooses them (cluster.Databases). An error that
// wraps ErrUsage is a selection the run refuses as a usage error.
type ListFunc func(ctx context.Context, conn *pgx.Conn) (dbs []string, skipped []archive.SkippedDatabase, err error)

// ErrUsage marks, in a checklist's Usage, a refusal the run would give as
// a usage error (exit 2): a selection that leaves no database.
var ErrUsage = errors.New("usage")

// DumpAll checks what dump --all with o would need: the source server
// (connection, TLS), pg_dump, the databases chosen by list, connections
// for every database's snapshot and -j, the right to read the roles'
// passwords, and for each database its lock slots (the databases'
// pg_dumps take turns within the lock table, dump.LockBudget, so each must
// fit alone) and the right to read what is selected; then room for the
// archive. It changes nothing.
func DumpAll(ctx context.Context, o DumpOptions, list ListFunc) *Checklist {
	c := &Checklist{}
	conn, srv := c.connect(ctx, "source", o.Source)
	if conn == nil {
		return c
	}
	defer conn.Close(context.WithoutCancel(ctx))
	dbs := c.databases(ctx, conn, list)
	if dbs == nil {
		return c
	}
	tools, err := o.Programs.Find(ctx, srv.Major())
	c.add(check("pg_dump", err, toolDetail(tools, tools.PgDump())+", with pg_dumpall for the globals"))
	c.add(passwords(ctx, conn))
	// The run's first connection (this one), a leader per database
	// holding its snapshot to the end, -j readers and a pg_dump.
	need := len(dbs) + o.Jobs + 1
	free, err := pg.ConnectionRoom(ctx, conn, o.Jobs, need)
	c.add(check("connections on the source", err, fmt.Sprintf("-j %d and %d databases need %d, %d free", o.Jobs, len(dbs), need, free)))
	c.lockBudget(ctx, conn)
	sel, raw := c.eachSource(ctx, o.Source, dbs, o.Filter, nil)
	c.output(ctx, o, sel, raw)
	return c
}

// CloneAll checks what clone --all with o would need: the source's
// checks of dump --all, the target's of restore --all (its server
// journal, the roles, each database), and two distinct servers. It
// changes nothing.
func CloneAll(ctx context.Context, o CloneOptions, list ListFunc) *Checklist {
	c := &Checklist{}
	sconn, tconn, ssrv, tsrv, done := c.connectBoth(ctx, o.Session.Source, o.Target)
	defer done()
	if tconn == nil {
		return c
	}
	dbs := c.databases(ctx, sconn, list)
	if dbs == nil {
		return c
	}
	switch same, err := pg.SeenBy(ctx, o.Session.Source, tconn, "pgsprint preflight", false); {
	case err != nil:
		c.add(verdict.Fail("distinct servers", err))
		return c
	case same:
		c.add(verdict.Fail("distinct servers", fmt.Errorf("--source and --target are the same server (%s): clone --all copies a server into another", pg.Describe(o.Target))))
		c.Usage = ErrUsage
		return c
	}
	dumpTools, err := o.Programs.Find(ctx, ssrv.Major())
	c.add(check("pg_dump", err, toolDetail(dumpTools, dumpTools.PgDump())+", with pg_dumpall for the globals"))
	if err == nil {
		m := &archive.Manifest{PgDumpVersion: dumpTools.Version, ServerVersion: ssrv.Version}
		tools, err := restore.RestoreTools(ctx, o.Programs, m, tsrv)
		c.add(check("pg_restore", err, toolDetail(tools, tools.PgRestore())))
	}
	c.add(passwords(ctx, sconn))
	c.roomFor(ctx, sconn, "source", o.Jobs)
	c.roomFor(ctx, tconn, "target", o.Jobs)
	c.lockBudget(ctx, sconn)
	roles, err := sourceRoles(ctx, sconn)
	if err != nil {
		c.add(verdict.Fail("roles", err))
	} else {
		c.add(rolesOnTarget(ctx, tconn, roles))
	}
	t := serverTarget{cfg: o.Target, conn: tconn, clean: o.Clean, resume: o.Resume, verb: "clone --all", of: "source"}
	if !t.read(ctx, c, "clone --all of "+pg.Describe(o.Session.Source)) {
		return c
	}
	c.eachSource(ctx, o.Session.Source, dbs, o.Filter, func(name string, conn *pgx.Conn) {
		t.database(ctx, c, name, func() (*archive.Manifest, string, error) {
			srv, err := pg.ReadServer(ctx, conn)
			if err != nil {
				return nil, "", err
			}
			m, err := cloneManifest(ctx, conn, srv, o.Filter)
			return m, "", err
		})
	})
	return c
}

// restoreAll adds restore --all's checks of the target server conn to c,
// for the whole-server archive m (nil: arriving on standard input): its
// server journal, the roles of the archive's globals, and each database.
func (c *Checklist) restoreAll(ctx context.Context, o RestoreOptions, conn *pgx.Conn, m *archive.Manifest) {
	t := serverTarget{cfg: o.Target, conn: conn, clean: o.Clean, resume: o.Resume, verb: "restore --all", of: "archive"}
	if m == nil {
		t.read(ctx, c, "")
		return
	}
	if o.Roles != nil {
		c.add(rolesOnTarget(ctx, conn, o.Roles))
	}
	if !t.read(ctx, c, journal.ArchiveID(m)) {
		return
	}
	for _, d := range m.Databases {
		sub := m.DatabaseManifest(d.Name)
		t.database(ctx, c, d.Name, func() (*archive.Manifest, string, error) { return sub, journal.ArchiveID(sub), nil })
	}
}

// databases adds the line of the databases list chooses, and returns
// them; nil when there are none (with the failed line, and Usage set for
// a selection the run refuses as a usage error).
func (c *Checklist) databases(ctx context.Context, conn *pgx.Conn, list ListFunc) []string {
	dbs, skipped, err := list(ctx, conn)
	if err != nil {
		c.add(verdict.Fail("databases", err))
		if errors.Is(err, ErrUsage) {
			c.Usage = err
		}
		return nil
	}
	var names, why []string
	for _, d := range dbs {
		names = append(names, pg.Ident(d))
	}
	for _, d := range skipped {
		why = append(why, fmt.Sprintf("%s (%s)", pg.Ident(d.Name), d.Reason))
	}
	detail := fmt.Sprintf("%d: %s", len(dbs), strings.Join(names, ", "))
	if len(why) > 0 {
		detail += "; skipped: " + strings.Join(why, ", ")
	}
	c.add(verdict.Pass("databases", detail))
	return dbs
}

// eachSource adds, for each database of the source server cfg reaches,
// its lock slots and the right to read what f selects, each line named
// after the database, then calls also (when set) with the database's
// connection. It returns whether every catalog could be read, and the
// selected tables' size on disk in all of them.
func (c *Checklist) eachSource(ctx context.Context, cfg *pgx.ConnConfig, dbs []string, f filter.Options, also func(name string, conn *pgx.Conn)) (bool, dump.Volume) {
	all, total := true, dump.Volume{}
	for _, name := range dbs {
		mark := len(c.Items)
		dcfg := cfg.Copy()
		dcfg.Database = name
		conn, err := pg.Connect(ctx, dcfg)
		if err == nil {
			if err = waitLittle(ctx, conn); err != nil {
				conn.Close(context.WithoutCancel(ctx))
			}
		}
		if err != nil {
			c.add(verdict.Fail("source", err))
			c.name(mark, name)
			all = false
			continue
		}
		c.lockSlots(ctx, conn)
		ok, raw := c.readable(ctx, conn, f)
		all, total = all && ok, total.Add(raw)
		c.name(mark, name)
		if also != nil {
			also(name, conn)
		}
		conn.Close(context.WithoutCancel(ctx))
	}
	return all, total
}

// name prefixes the items added since mark with the database they are of.
func (c *Checklist) name(mark int, database string) {
	for i := mark; i < len(c.Items); i++ {
		c.Items[i].Name = "database " + pg.Ident(database) + ": " + c.Items[i].Name
	}
}

// lockBudget adds the line that says how a whole-server dump shares the
// source's lock table (dump.LockBudget, sized as ReadLockTable's
// Documented): each database's pg_dump takes its tables' slots before it
// starts, and those that do not fit together take turns.
func (c *Checklist) lockBudget(ctx context.Context, conn *pgx.Conn) {
	t, err := dump.ReadLockTable(ctx, conn)
	c.add(check("lock slots", err, fmt.Sprintf("the databases' pg_dumps take turns within the lock table's %d slots: each database must fit alone (below)", t.Documented)))
}

// passwords says whether the roles' passwords can be read (pg_authid): a
// whole-server run without that right copies the roles without them.
func passwords(ctx context.Context, conn *pgx.Conn) verdict.Item {
	var readable bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT')").Scan(&readable); err != nil {
		return verdict.Fail("globals", fmt.Errorf("check access to pg_authid: %w", err))
	}
	if !readable {
		return verdict.Warn("globals", "pg_authid cannot be read: the roles are copied without their passwords (as pg_dumpall --no-role-passwords); set them again on the target, or run as a superuser")
	}
	return verdict.Pass("globals", "roles (with their passwords), memberships, settings and tablespaces readable")
}

// sourceRoles lists the source server's roles that a whole-server copy
// creates on the target: not the predefined pg_* roles, nor a server
// journal (journal.ClusterRole, never copied).
func sourceRoles(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT rolname::text FROM pg_catalog.pg_roles WHERE rolname !~ '^pg_' AND rolname <> $1 ORDER BY 1", journal.ClusterRole)
	if err != nil {
		return nil, fmt.Errorf("list the source's roles: %w", err)
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list the source's roles: %w", err)
	}
	return roles, nil
}

// rolesOnTarget checks the roles a whole-server run restores: those the
// target lacks are created, which needs a superuser or CREATEROLE; those
// it has are kept as they are.
func rolesOnTarget(ctx context.Context, conn *pgx.Conn, roles []string) verdict.Item {
	var missing []string
	var can bool
	var user string
	if err := conn.QueryRow(ctx, `SELECT coalesce(array_agg(r ORDER BY r) FILTER (WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r)), '{}'),
			(SELECT rolsuper OR rolcreaterole FROM pg_catalog.pg_roles WHERE rolname = current_user), current_user::text
		FROM unnest($1::text[]) r WHERE r <> $2`, roles, journal.ClusterRole).Scan(&missing, &can, &user); err != nil {
		return verdict.Fail("roles", fmt.Errorf("look up the roles on the target: %w", err))
	}
	detail := fmt.Sprintf("%d roles: %d on the target already (kept as they are), %d to create", len(roles), len(roles)-len(missing), len(missing))
	if len(missing) > 0 && !can {
		return verdict.Fail("roles", fmt.Errorf("%d roles are missing on the target (%s), and role %s may not create roles: run as a superuser or a role with CREATEROLE, or create them first", len(missing), names(missing), pg.Ident(user)))
	}
	return verdict.Pass("roles", detail)
}

// names lists up to five names, and how many more.
func names(list []string) string {
	var out []string
	for i, n := range list {
		if i == 5 {
			out = append(out, fmt.Sprintf("and %d more", len(list)-5))
			break
		}
		out = append(out, pg.Ident(n))
	}
	return strings.Join(out, ", ")
}

// serverTarget is the target server of a whole-server restore or clone,
// as its checks read it.
type serverTarget struct {
	cfg           *pgx.ConnConfig
	conn          *pgx.Conn
	clean, resume bool
	verb, of      string // "restore --all", "archive"
	journal       *journal.Cluster
	existing      map[string]bool
	createdb      bool
	user          string
}

// read adds the check of the target's server journal against the run
// whose identity is id ("" when unknown: an archive on standard input) and
// reads what the databases' checks need; false when they cannot run.
func (t *serverTarget) read(ctx context.Context, c *Checklist, id string) bool {
	found, err := journal.ReadCluster(ctx, t.conn)
	if err == nil && id != "" {
		t.journal, err = cluster.Journal(found, id, t.clean, t.resume, t.verb, t.of)
	}
	switch {
	case err != nil:
		c.add(verdict.Fail("server journal", err))
		return false
	case t.journal != nil:
		c.add(verdict.Pass("server journal", fmt.Sprintf("an unfinished %s of this %s: --resume finishes it", t.verb, t.of)))
	case found != nil && id != "":
		c.add(verdict.Pass("server journal", fmt.Sprintf("an unfinished %s of another %s: --clean starts over", t.verb, t.of)))
	case found != nil:
		c.add(verdict.Warn("server journal", fmt.Sprintf("the target holds an unfinished %s: the run finishes it with --resume (the same archive), starts over with --clean, or refuses", t.verb)))
	default:
		c.add(verdict.Pass("server journal", "none: no unfinished whole-server run on the target"))
	}
	if id == "" {
		return false
	}
	if err := t.conn.QueryRow(ctx, "SELECT rolsuper OR rolcreatedb, rolname::text FROM pg_catalog.pg_roles WHERE rolname = current_user").Scan(&t.createdb, &t.user); err != nil {
		c.add(verdict.Fail("target databases", fmt.Errorf("read the target user's privileges: %w", err)))
		return false
	}
	rows, err := t.conn.Query(ctx, "SELECT datname::text FROM pg_catalog.pg_database")
	if err == nil {
		var list []string
		if list, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			t.existing = map[string]bool{}
			for _, d := range list {
				t.existing[d] = true
			}
		}
	}
	if err != nil {
		c.add(verdict.Fail("target databases", fmt.Errorf("list the target's databases: %w", err)))
		return false
	}
	return true
}

// database adds the checks of database name on the target: postgres is
// restored into (the one-database checks of what it holds, with the
// manifest mf gives and the journal identity of its run), another is
// created, or replaced (--clean), or finished (--resume).
func (t *serverTarget) database(ctx context.Context, c *Checklist, name string, mf func() (*archive.Manifest, string, error)) {
	mark := len(c.Items)
	defer c.name(mark, name)
	switch {
	case name == "postgres":
		m, id, err := mf()
		if err != nil {
			c.add(verdict.Fail("target database", err))
			return
		}
		cfg := t.cfg.Copy()
		cfg.Database = name
		conn, err := pg.Connect(ctx, cfg)
		if err != nil {
			c.add(verdict.Fail("target database", err))
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		begun := t.journal.HasBegun(name)
		c.targetState(ctx, cfg, conn, m, id, false, t.clean || begun, t.resume && begun, false, false)
	case t.existing[name] && t.journal.HasBegun(name):
		c.add(verdict.Pass("target database", fmt.Sprintf("%q was begun by the unfinished run: --resume finishes or replaces it", name)))
	case t.existing[name] && t.journal == nil && !t.clean:
		c.add(verdict.Fail("target database", cluster.ExistingDatabase(name, t.verb)))
	case !t.createdb:
		c.add(verdict.Fail("target database", fmt.Errorf("role %s may not create databases (CREATEDB), and %s creates %q: run as a superuser or a role with CREATEDB", pg.Ident(t.user), t.verb, name)))
	case t.existing[name]:
		c.add(verdict.Pass("target database", fmt.Sprintf("%q exists: --clean drops it and creates it again", name)))
	default:
		c.add(verdict.Pass("target database", fmt.Sprintf("%q does not exist: created", name)))
	}
}

// AsUsage marks err as a refusal the run gives as a usage error
// (errors.Is(err, ErrUsage)), keeping its words.
func AsUsage(err error) error { return usageErr{err} }

type usageErr struct{ error }

func (e usageErr) Is(target error) bool { return target == ErrUsage }

func (e usageErr) Unwrap() error { return e.error }
