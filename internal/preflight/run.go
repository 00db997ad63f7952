package preflight

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/follow"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/toc"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// DumpOptions are what a dump's checklist needs: the dump's own options
// (dump.Options, as the command gives dump.Run, so that a flag is
// declared once) and what only a preflight reads.
type DumpOptions struct {
	// Options are the dump's: Source, Jobs, Filter, Snapshot, File ("-",
	// a path, or a URL whose Backend is Output), Overwrite, Codec
	// (compressed unless "none"), Programs, and Subset and Mask (checked
	// against the source as the run checks them: subset.Compute,
	// mask.Resolve) are read here.
	dump.Options
	// Output is File's object store, opened; nil for a path or "-".
	Output store.Backend
}

// Dump checks what a dump with o would need: the source (connection,
// TLS), pg_dump, connections for -j, lock slots, the right to read what is
// selected, and room for the archive where it goes. It changes nothing.
func Dump(ctx context.Context, o DumpOptions) *Checklist {
	c := &Checklist{}
	conn, srv := c.connect(ctx, "source", o.Source)
	if conn == nil {
		return c
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tools, err := o.Programs.Find(ctx, srv.Major())
	c.add(check("pg_dump", err, toolDetail(tools, tools.PgDump())))
	c.roomFor(ctx, conn, "source", o.Jobs)
	if o.Snapshot != "" {
		c.add(check("snapshot", importable(ctx, conn, o.Snapshot), o.Snapshot+" can be imported"))
	}
	c.lockSlots(ctx, conn)
	sel, raw := c.readable(ctx, conn, o.Filter)
	c.rules(ctx, conn, srv, o.Subset, o.Mask)
	c.output(ctx, o, sel, raw)
	return c
}

// output adds the check of where the archive goes: standard output, an
// object store (written to, by an upload started and aborted), or a
// directory with room for it, estimated from raw bytes of tables when
// the catalog could be read (sel).
func (c *Checklist) output(ctx context.Context, o DumpOptions, sel bool, raw dump.Volume) {
	switch {
	case o.File == "-":
		c.add(verdict.Pass("output", "standard output"))
	case o.Output != nil:
		it := writableStore(ctx, o.Output, o.Overwrite)
		var ae *store.AccessError
		if errors.As(it.Err, &ae) {
			c.Connect = it.Err
		}
		c.add(it)
	default:
		if sel {
			c.add(diskSpace(dump.DirOf(o.File), raw.Archive(o.Codec != nil && o.Codec.Name() != "none"), "the archive"))
		}
	}
}

// RestoreOptions are what a restore's checklist needs: the restore's own
// options (restore.Options, as the command gives restore.Run, so that a
// flag is declared once) and what only a preflight reads.
type RestoreOptions struct {
	// Options are the restore's: Target, Jobs, Filter, Create, Clean,
	// Resume, UseList, KeepGoing (what the target lacks is then a
	// warning, the run going on past it, rather than a failure) and
	// Programs are read here, Where names the archive, and all of them
	// reach restore.Contents, which reads the schema entries the restore
	// would create, for what the target lacks of what they need.
	restore.Options
	// Archive is the opened archive; nil with ArchiveErr when it could not
	// be opened, nil without when it arrives on standard input (Pipe),
	// which a preflight must not read.
	Archive    archive.Source
	ArchiveErr error
	// SpillDir is --spill-dir, where a piped archive's data waits for a
	// connection (the command's, not restore.Options').
	SpillDir string
	// All checks restore --all of a whole-server archive, with Roles the
	// roles its globals create (nil: not read); Database, the restore of
	// one database of it (--database).
	All      bool
	Roles    []string
	Database string
}

// Restore checks what a restore with o would need: the archive, the
// target (connection, TLS), pg_restore, connections for -j, the target's
// state (empty, or holding this restore's journal), the encoding, and
// room to spill a piped archive. It changes nothing.
func Restore(ctx context.Context, o RestoreOptions) *Checklist {
	c := &Checklist{}
	var m *archive.Manifest
	switch {
	case o.ArchiveErr != nil:
		c.add(verdict.Fail("archive", fmt.Errorf("%w: check -f (and, for s3://, the store's flags and credentials)", o.ArchiveErr)))
	case o.Archive == nil:
		c.add(verdict.Pass("archive", "standard input: read only by the restore itself"))
	default:
		m = o.Archive.Manifest()
		switch {
		case !m.IsCluster() && (o.All || o.Database != ""):
			c.add(verdict.Fail("archive", fmt.Errorf("%s: the archive holds one database (%q), not a whole server (dump --all): restore it without --all or --database", o.Where, m.Database)))
			return c
		case m.IsCluster() && o.Database != "":
			sub := m.DatabaseManifest(o.Database)
			if sub == nil {
				c.add(verdict.Fail("archive", fmt.Errorf("%s: the archive holds no database %q (it holds %s)", o.Where, o.Database, databaseNames(m))))
				return c
			}
			m = sub
			c.add(verdict.Pass("archive", archiveDetail(o.Where, m)))
		case m.IsCluster() && !o.All:
			c.add(verdict.Fail("archive", fmt.Errorf("%s: a whole-server archive (dump --all): restore it with --all, or one of its databases with --database NAME", o.Where)))
			return c
		case m.IsCluster():
			c.add(verdict.Pass("archive", fmt.Sprintf("%s: a whole server of PostgreSQL %s, %d databases (%s)", o.Where, strings.Fields(m.ServerVersion + " ?")[0], len(m.Databases), databaseNames(m))))
		default:
			c.add(verdict.Pass("archive", archiveDetail(o.Where, m)))
		}
	}
	conn, srv := c.connect(ctx, "target", o.Target)
	if conn == nil {
		return c
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if m != nil {
		tools, err := restore.RestoreTools(ctx, o.Programs, m, srv)
		c.add(check("pg_restore", err, toolDetail(tools, tools.PgRestore())))
	} else {
		tools, err := o.Programs.Find(ctx, srv.Major())
		c.add(check("pg_restore", err, toolDetail(tools, tools.PgRestore())+" (the archive's pg_dump may ask for a newer one)"))
	}
	c.roomFor(ctx, conn, "target", o.Jobs)
	switch {
	case o.All:
		c.restoreAll(ctx, o, conn, m)
	case m != nil:
		c.targetState(ctx, o.Target, conn, m, journal.ArchiveID(m), o.Create, o.Clean, o.Resume, o.Filter.DataOnly || m.DataOnly, o.Filter.Partial() || o.UseList != "")
		if o.Archive != nil && o.Database == "" && !o.Filter.DataOnly && !m.DataOnly {
			ro := o.Options
			ro.Logger = nil // a preflight says what it found in its lines, nothing else
			contents := func(ctx context.Context) ([]toc.Entry, error) { return restore.Contents(ctx, o.Archive, ro) }
			c.targetLacks(ctx, conn, contents, o.Create, o.KeepGoing)
		}
	}
	if o.Archive == nil && o.ArchiveErr == nil {
		c.add(diskSpace(o.SpillDir, 0, "data waiting for a connection (--spill-dir)"))
	}
	return c
}

// CloneOptions are what a clone's checklist needs: the clone's own
// options (clone.Options, as the command gives clone.Run, so that a flag
// is declared once) and clone --follow's.
type CloneOptions struct {
	// Options are the clone's: the restore's (Target, Jobs, Filter,
	// Clean, Resume, KeepGoing, Programs: RestoreOptions') and the
	// session's on the source (Session.Source, Snapshot, Subset, Mask:
	// DumpOptions'); all of them reach clone.Contents, which reads the
	// source's schema as the clone would, for what the target lacks.
	clone.Options
	// Follow, when set, adds clone --follow's checks.
	Follow *FollowOptions
}

// FollowOptions are clone --follow's, resolved.
type FollowOptions struct {
	Slot, Publication string
	// Conninfo is how the target server would reach the source: the
	// source's host, port, user and database unless --follow-conninfo.
	Conninfo string
	// ConninfoErr is why no connection string can be given the
	// subscription (a source password without --follow-conninfo).
	ConninfoErr                    error
	ReplicaIdentityFull, SkipNoKey bool
}

// Clone checks what a clone with o would need on both servers: the
// dump's checks on the source, the restore's on the target, and with
// Follow the logical replication's. It changes nothing.
func Clone(ctx context.Context, o CloneOptions) *Checklist {
	c := &Checklist{}
	sconn, tconn, ssrv, tsrv, done := c.connectBoth(ctx, o.Session.Source, o.Target)
	defer done()
	if tconn == nil {
		return c
	}
	if err := clone.DistinctDatabases(ctx, o.Session.Source, tconn); err != nil {
		c.add(verdict.Fail("distinct databases", err))
		return c
	}
	dumpTools, err := o.Programs.Find(ctx, ssrv.Major())
	c.add(check("pg_dump", err, toolDetail(dumpTools, dumpTools.PgDump())))
	if err == nil {
		m := &archive.Manifest{PgDumpVersion: dumpTools.Version, ServerVersion: ssrv.Version}
		tools, err := restore.RestoreTools(ctx, o.Programs, m, tsrv)
		c.add(check("pg_restore", err, toolDetail(tools, tools.PgRestore())))
	}
	c.roomFor(ctx, sconn, "source", o.Jobs)
	c.roomFor(ctx, tconn, "target", o.Jobs)
	if o.Session.Snapshot != "" {
		c.add(check("snapshot", importable(ctx, sconn, o.Session.Snapshot), o.Session.Snapshot+" can be imported"))
	}
	c.lockSlots(ctx, sconn)
	c.readable(ctx, sconn, o.Filter)
	c.rules(ctx, sconn, ssrv, o.Session.Subset, o.Session.Mask)
	m, err := cloneManifest(ctx, sconn, ssrv, o.Filter)
	if err != nil {
		c.add(verdict.Fail("source catalog", err))
		return c
	}
	// A clone's journal is named after its snapshot (journal.ArchiveID
	// of its manifest); without one there is nothing to resume.
	c.targetState(ctx, o.Target, tconn, m, "", false, o.Clean, o.Resume, o.Filter.DataOnly, o.Filter.Partial())
	if !o.Filter.DataOnly {
		co := o.Options
		co.Logger, co.Session.Logger = nil, nil // a preflight says what it found in its lines, nothing else
		contents := func(ctx context.Context) ([]toc.Entry, error) { return clone.Contents(ctx, co) }
		c.targetLacks(ctx, tconn, contents, false, o.KeepGoing)
	}
	if o.Follow != nil {
		c.follow(ctx, sconn, tconn, o.Filter, *o.Follow)
	}
	return c
}

// connectBoth opens the source's connection, then the target's
// (connect); the target's is nil when either cannot be reached. done
// closes what was opened.
func (c *Checklist) connectBoth(ctx context.Context, source, target *pgx.ConnConfig) (sconn, tconn *pgx.Conn, ssrv, tsrv pg.Server, done func()) {
	var opened []*pgx.Conn
	done = func() {
		for _, conn := range opened {
			conn.Close(context.WithoutCancel(ctx))
		}
	}
	if sconn, ssrv = c.connect(ctx, "source", source); sconn == nil {
		return nil, nil, ssrv, tsrv, done
	}
	opened = append(opened, sconn)
	if tconn, tsrv = c.connect(ctx, "target", target); tconn != nil {
		opened = append(opened, tconn)
	}
	return sconn, tconn, ssrv, tsrv, done
}

// connect opens a connection to cfg, adding its line (TLS in use or not);
// nil when it cannot, with c.Connect set.
func (c *Checklist) connect(ctx context.Context, role string, cfg *pgx.ConnConfig) (*pgx.Conn, pg.Server) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		c.add(verdict.Fail(role, err))
		c.Connect = err
		return nil, pg.Server{}
	}
	srv, err := pg.ReadServer(ctx, conn)
	if err == nil {
		err = waitLittle(ctx, conn)
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		c.add(verdict.Fail(role, err))
		return nil, pg.Server{}
	}
	tlsState := "no TLS"
	if tc, ok := conn.PgConn().Conn().(*tls.Conn); ok {
		st := tc.ConnectionState()
		tlsState = "TLS (" + tls.VersionName(st.Version) + ")"
	}
	detail := fmt.Sprintf("%s, PostgreSQL %s, %s, %s", pg.Describe(cfg), strings.Fields(srv.Version)[0], srv.Encoding, tlsState)
	if srv.InRecovery {
		detail += ", a standby"
	}
	c.add(verdict.Pass(role, detail))
	return conn, srv
}

func toolDetail(t pgbin.Tools, path string) string {
	return fmt.Sprintf("%s (%s)", path, t.Version)
}

// roomFor adds the check of connections for -j jobs and one more (the
// leader, pg_dump or pg_restore), as the run asks it.
func (c *Checklist) roomFor(ctx context.Context, conn *pgx.Conn, role string, jobs int) {
	free, err := pg.ConnectionRoom(ctx, conn, jobs, jobs+1)
	c.add(check(fmt.Sprintf("connections on the %s", role), err, fmt.Sprintf("-j %d needs %d, %d free", jobs, jobs+1, free)))
}

// lockSlots adds the check of the source's lock table against the tables
// pg_dump locks.
func (c *Checklist) lockSlots(ctx context.Context, conn *pgx.Conn) {
	n, err := dump.TablesToLock(ctx, conn)
	if err != nil {
		c.add(verdict.Fail("lock slots", err))
		return
	}
	warning, detail, err := dump.LockSlots(ctx, conn, n)
	switch {
	case err != nil:
		c.add(verdict.Fail("lock slots", err))
	case warning:
		c.add(verdict.Warn("lock slots", detail))
	default:
		c.add(verdict.Pass("lock slots", detail))
	}
}

// importable checks that snapshot can be imported, in a transaction
// rolled back at once.
func importable(ctx context.Context, conn *pgx.Conn, snapshot string) error {
	err := pg.ImportSnapshot(ctx, conn, snapshot)
	if _, rerr := conn.Exec(ctx, "ROLLBACK"); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("%w: is the process that exported it (pgsprint snapshot) still running?", err)
	}
	return nil
}

// readable adds the checks of the right to read what f selects (Readable,
// ReadableLargeObjects). It returns whether the catalog could be read, and
// the selected tables' size on disk.
func (c *Checklist) readable(ctx context.Context, conn *pgx.Conn, f filter.Options) (bool, dump.Volume) {
	n, raw, err := dump.Readable(ctx, conn, f, true)
	var pe dump.PrivilegeError
	switch {
	case errors.As(err, &pe):
		c.add(verdict.Fail("read privileges", err))
	case err != nil:
		c.add(verdict.Fail("read privileges", err))
		return false, dump.Volume{}
	default:
		c.add(verdict.Pass("read privileges", fmt.Sprintf("%d tables and sequences selected, all readable", n)))
	}
	if f.LargeObjects() {
		n, err := dump.ReadableLargeObjects(ctx, conn)
		c.add(check("large objects", err, fmt.Sprintf("%d, all readable", n)))
	}
	return true, raw
}

// targetState adds the check of what the target holds, as the run's
// pre-data checks it: its journal, and emptiness or (--data-only) empty
// tables to load.
func (c *Checklist) targetState(ctx context.Context, cfg *pgx.ConnConfig, conn *pgx.Conn, m *archive.Manifest, id string, create, clean, resume, dataOnly, partial bool) {
	database := cfg.Database
	if create {
		created := cfg.Copy()
		created.Database = m.Database
		cc, err := pg.Connect(ctx, created)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "3D000":
			c.add(verdict.Pass("target database", fmt.Sprintf("%q does not exist: --create creates it", m.Database)))
			return
		case err != nil:
			c.add(verdict.Fail("target database", err))
			return
		}
		defer cc.Close(context.WithoutCancel(ctx))
		conn, database = cc, m.Database
		if !clean && !resume {
			c.add(verdict.Fail("target database", fmt.Errorf("database %q exists: --create would fail; add --clean to replace it, or restore into it without --create", m.Database)))
			return
		}
	}
	j, err := journal.Read(ctx, conn)
	if err != nil {
		c.add(verdict.Fail("target database", err))
		return
	}
	if j != nil {
		if id == "" {
			id = j.ID() // a clone's: compared by the run with its snapshot's
		}
		err := restore.Journal(j.ID(), id, resume, clean, database)
		c.add(check("target database", err, fmt.Sprintf("%q holds an unfinished run: --resume finishes it", database)))
		return
	}
	switch {
	case clean:
		c.add(verdict.Pass("target database", "--clean drops the archive's objects first"))
	case dataOnly:
		c.add(check("target database", restore.DataTargets(ctx, conn, m.Tables), fmt.Sprintf("the %d tables to load exist and are empty", len(m.Tables))))
	case partial:
		c.add(verdict.Pass("target database", "a partial restore may go into a database that holds other objects: the run checks the selected ones"))
	default:
		c.add(check("target database", restore.Empty(ctx, conn, database), fmt.Sprintf("%q is empty", database)))
	}
	c.privileges(ctx, conn, m, dataOnly)
	c.add(check("encoding", restore.Encoding(ctx, conn, m), encodingDetail(m.Encoding, conn.PgConn().ParameterStatus("server_encoding"))))
}

func encodingDetail(from, to string) string {
	if from == to {
		return from + " into " + to
	}
	return fmt.Sprintf("%s into %s: every name fits", from, to)
}

func archiveDetail(where string, m *archive.Manifest) string {
	return fmt.Sprintf("%s: database %q of PostgreSQL %s, %d tables, %d sequences, %d large objects", where, m.Database, strings.Fields(m.ServerVersion + " ?")[0], len(m.Tables), len(m.Sequences), len(m.LargeObjects))
}

// cloneManifest is the part of a clone's manifest the target's checks
// read: the encoding and the selected tables' names and columns.
func cloneManifest(ctx context.Context, conn *pgx.Conn, srv pg.Server, f filter.Options) (*archive.Manifest, error) {
	selected, err := f.Selected("c", "n")
	if err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT n.nspname, c.relname,
			coalesce((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
				WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '{}')
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
		AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
		AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
			WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
		AND (`+selected+`)
		ORDER BY n.nspname, c.relname`)
	if err != nil {
		return nil, fmt.Errorf("list the source's tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (archive.Table, error) {
		var t archive.Table
		return t, r.Scan(&t.Schema, &t.Name, &t.Columns)
	})
	if err != nil {
		return nil, fmt.Errorf("list the source's tables: %w", err)
	}
	return &archive.Manifest{Database: srv.Database, Encoding: srv.Encoding, ServerVersion: srv.Version, Tables: tables}, nil
}

// writableStore checks an archive's object-storage location as dump's
// own start does: credentials, bucket, no object in the way (unless
// overwrite), and the right to write, by starting a multipart upload and
// aborting it at once.
func writableStore(ctx context.Context, b store.Backend, overwrite bool) verdict.Item {
	sink, err := b.Create(ctx, store.CreateOptions{Overwrite: overwrite})
	if err != nil {
		return verdict.Fail("output", err)
	}
	sink.Abort()
	return verdict.Pass("output", b.String()+": credentials, bucket and the right to write (an upload started and aborted)")
}

// follow adds clone --follow's checks: the source's settings and rights,
// the replica identity of every table it would publish, the target's
// right to subscribe, and the subscription's connection string, tried
// from here on a replication connection (the target server's own reach
// is probed by the run, with objects a preflight does not create).
func (c *Checklist) follow(ctx context.Context, sconn, tconn *pgx.Conn, f filter.Options, o FollowOptions) {
	req, err := follow.ReadSourceSettings(ctx, sconn, o.Slot, o.Publication)
	if err != nil {
		c.add(verdict.Fail("follow: source", err))
	} else {
		c.add(req.Requirements()...)
	}
	tables, err := follow.SourceTables(ctx, sconn, f)
	if err == nil {
		err = follow.Keyless(tables, o.ReplicaIdentityFull, o.SkipNoKey)
	}
	c.add(check("follow: replica identity", err, fmt.Sprintf("%d tables, each with a primary key or replica identity (or handled by --replica-identity-full/--follow-skip-no-key)", len(tables))))
	target, err := follow.ReadTargetSettings(ctx, tconn, o.Slot)
	if err != nil {
		c.add(verdict.Fail("follow: target", err))
	} else {
		c.add(target.Requirements()...)
	}
	if o.ConninfoErr != nil {
		c.add(verdict.Fail("follow: source reach", o.ConninfoErr))
		return
	}
	c.add(check("follow: source reach", replicationReach(ctx, o.Conninfo),
		"the subscription's connection string opens a replication connection from here (from the target server, the run probes it before copying)"))
}

// replicationReach opens a replication connection with conninfo and asks
// the server to identify itself, which changes nothing.
func replicationReach(ctx context.Context, conninfo string) error {
	cfg, err := pgconn.ParseConfig(conninfo)
	if err != nil {
		return fmt.Errorf("the subscription's connection string does not parse: %w: give --follow-conninfo", err)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["replication"] = "database"
	cfg.RuntimeParams["application_name"] = "pgsprint preflight"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("a replication connection with the subscription's connection string fails from here (%s): give --follow-conninfo as the target server must connect, and a replication line in the source's pg_hba.conf for it",
			(&pg.ConnectError{Target: "the source", Err: err}).Error())
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.Exec(ctx, "IDENTIFY_SYSTEM").Close(); err != nil {
		return fmt.Errorf("IDENTIFY_SYSTEM on the source's replication connection: %w", err)
	}
	return nil
}

// databaseNames lists a whole-server archive's databases.
func databaseNames(m *archive.Manifest) string {
	var list []string
	for _, d := range m.Databases {
		list = append(list, d.Name)
	}
	return names(list)
}

// waitLittle makes conn wait for no lock for long: a preflight's reads of
// the tables' sizes lock each table, behind any session that holds one
// exclusively; a preflight says so rather than wait.
func waitLittle(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SET lock_timeout = '10s'")
	return err
}

// diskSpace is dump.DiskSpace's verdict on dir as an item.
func diskSpace(dir string, need int64, what string) verdict.Item {
	name := "disk space in " + dir
	warning, detail, err := dump.DiskSpace(dir, need, what)
	switch {
	case err != nil:
		return verdict.Fail(name, err)
	case warning:
		return verdict.Warn(name, detail)
	}
	return verdict.Pass(name, detail)
}
