package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// CloneOptions configure a whole-server clone: what clone.Options says of
// one database, said once for every database, and which databases to
// leave out.
type CloneOptions struct {
	// Options apply to every database, as clone applies them to one, with
	// these meanings for the whole server: Session.Source is the source server,
	// through the database to list the others from; Target the target
	// server, through the database to connect to first; Clean replaces
	// the source's databases the target has; Settings' NoOwner and NoACL,
	// and Filter.Objects.NoTablespaces, apply to the globals too; Resume
	// finishes an interrupted clone --all of the same source: the globals
	// and the databases it finished are skipped, the others cloned again
	// from the start in a fresh snapshot (a database's snapshot ends with
	// the run that took it), so Session.Snapshot is not taken; Programs, when nil,
	// is one Finder for every database; Progress hears about every
	// database's work, as one stream.
	clone.Options
	ExcludeDatabases []string
	// NoRolePasswords copies the roles without their passwords (as
	// pg_dumpall --no-role-passwords).
	NoRolePasswords bool
}

// ErrSameServer is returned, before anything is written, when the source
// and the target are one server.
var ErrSameServer = errors.New("--source and --target are the same server")

// Clone copies a whole server to another without an archive: the globals
// (pg_dumpall --globals-only of the source, restored as restore --all
// does), then each database, cloned as clone does (its own snapshot) into
// a database created as pg_restore --create creates it, several at once.
// A killed clone --all is finished with Resume: the databases it finished
// are kept (each is a copy of its source database as of its own
// snapshot), the others are dropped and cloned again in a new snapshot.
func Clone(ctx context.Context, opts CloneOptions) (*RestoreResult, error) {
	start := time.Now()
	if opts.Session.Snapshot != "" {
		return nil, errors.New("clone --all takes a snapshot of each database: it does not take --snapshot")
	}
	opts.Jobs = max(opts.Jobs, 1)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Programs == nil {
		opts.Programs = &pgbin.Finder{} // looked for once, not once per database
	}
	src, err := openSource(ctx, opts.Session.Source, opts.ExcludeDatabases, opts.Programs)
	if err != nil {
		return nil, err
	}
	defer src.close(ctx)
	conn, tools, locks, dbs, skipped := src.conn, src.tools, src.locks, src.dbs, src.skipped
	if len(dbs) == 0 {
		// As dump --all: globals alone are not what was asked for.
		return nil, noDatabase("clone", opts.Session.Source, skipped)
	}
	for _, d := range skipped {
		opts.Logger.Info("database skipped", "database", d.Name, "reason", d.Reason)
	}
	if same, err := sameServer(ctx, opts.Session.Source, opts.Target); err != nil || same {
		if err == nil {
			err = fmt.Errorf("%w (%s): clone --all copies a server into another", ErrSameServer, pg.Describe(opts.Target))
		}
		return nil, err
	}
	script, noPasswords, err := readGlobals(ctx, conn, opts.Session.Source, tools, opts.NoRolePasswords)
	if err != nil {
		return nil, err
	}
	if noPasswords && !opts.NoRolePasswords {
		opts.Logger.Warn("cannot read pg_authid: roles are copied without their passwords (as pg_dumpall --no-role-passwords); set them again on the target")
	}
	var list []archive.Database
	for _, d := range dbs {
		list = append(list, archive.Database{Name: d.name, SizeBytes: d.size, Owner: d.owner})
	}
	b := &build{
		target: opts.Target, id: "clone --all of " + pg.Describe(opts.Session.Source),
		jobs: opts.Jobs, clean: opts.Clean, resume: opts.Resume, verb: "clone --all", of: "source", dbs: list, noOwner: opts.NoOwner,
		globals: func() (string, error) { return string(script), nil },
		gopts:   GlobalsOptions{NoTablespaces: opts.Filter.Objects.NoTablespaces, Settings: opts.Settings},
		one: func(ctx context.Context, name string, jobs int, s step, rep progress.Reporter) (*restore.Result, error) {
			src := opts.Session.Source.Copy()
			src.Database = name
			// A database the interrupted run began is replaced, never
			// resumed (resumable is false): it is cloned again from the
			// start in a fresh snapshot.
			co := opts.Options
			co.Session.Source, co.Jobs, co.Clean, co.Create = src, jobs, s == replaceDB, true
			co.Session.Snapshot, co.Resume = "", false
			co.Logger, co.Progress, co.Session.Locks = opts.Logger.With("database", name), rep, locks
			if name == "postgres" {
				// Every server has one: cloned into, as restore --all does.
				co.Target = opts.Target.Copy()
				co.Target.Database, co.Create = name, false
			}
			return clone.Run(ctx, co)
		},
		log: opts.Logger, progress: progress.NewParts(reporterOr(opts.Progress), "clone"),
		// Until a database's catalog is read, its size on the source
		// (indexes and catalogs included) stands for what it will move.
		expect: func(d archive.Database) progress.Expected {
			return progress.Expected{Op: "clone", Bytes: d.SizeBytes, Estimated: true}
		},
	}
	res, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// sameServer reports whether source and target reach one server: a source
// connection with a random application_name is looked for in the target's
// pg_stat_activity (as clone's same-database check, on any database).
func sameServer(ctx context.Context, source, target *pgx.ConnConfig) (bool, error) {
	conn, err := pg.Connect(ctx, target)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return pg.SeenBy(ctx, source, conn, "pgsprint clone --all", false)
}
