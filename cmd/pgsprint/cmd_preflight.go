package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/clone"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/follow"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/preflight"
	"github.com/pgsprint/pgsprint/internal/store/location"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// errNotReady ends a preflight whose checklist has a failed item: the
// checklist has said why, line by line.
var errNotReady = errors.New("preflight: the run would not start (see the ✗ lines above)")

func newPreflightCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "preflight dump|restore|clone [FLAGS]",
		Short: "Check, changing nothing, that a dump, restore or clone would start",
		Long: `Check what a dump, restore or clone with the same flags would need, and
print a checklist: ✓ for what is in place, ! for what may still fail, and
✗ with the fix for what would stop the run. Nothing is changed on any
server or store, and no file is written.

Checked, where they apply: each connection (and whether it uses TLS);
the right to read every selected table, sequence and large object;
pg_dump/pg_restore found, with their versions; the source's lock table
against the tables pg_dump locks; connections for -j on each server; disk
space for the archive (estimated from the tables' sizes) or the spill
directory; a target database that is empty (naming what it holds) or holds
this run's journal; the target's encoding; for a restore, what the target
lacks of what the archive's objects need (extensions, ICU and builtin
collation providers and collations, lz4 compression, roles and owners,
tablespaces), naming the objects that need each and what --keep-going
would skip (a warning with --keep-going, a failure without); with clone --follow, wal_level,
free replication slots and WAL senders, the replica identity of every
table, the right to create the publication and the subscription, and the
subscription's connection string (tried from here on a replication
connection); for s3:// archives, credentials, bucket and the right to
write (a multipart upload started and aborted).

With --all (and restore --database), every database the run would read
or create is checked, each line named after it, with the server's own
checks: the databases chosen and skipped, the roles' passwords, the
server journal, the roles the target lacks, and whether each target
database is created, replaced (--clean) or refused (it exists).

The commands run the same checks (one function each) before they start:
connections for -j, the lock table, the right to read what is selected,
the target's emptiness, journal and encoding, the client programs, disk
space for the archive, and follow's requirements.

Exit status: 0 when the run would start, 1 when a check failed, 2 for a
usage error, 3 when a server or store cannot be reached.`,
		Example: `  pgsprint preflight dump -d prod -f prod.pgs -j 8
  pgsprint preflight restore -f prod.pgs -d copy -j 8
  pgsprint preflight restore --all -f server.pgs -d "host=new dbname=postgres"
  pgsprint preflight clone --source prod --target "host=new dbname=prod" --follow`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("preflight of what? give dump, restore or clone and its flags (see %s --help)", cmd.CommandPath())}
		},
	}
	dump, do := dumpCommand()
	checkThen(dump, do, preflightDump)
	restore, ro := restoreCommand()
	checkThen(restore, ro, preflightRestore)
	clone, co := cloneCommand()
	checkThen(clone, co, preflightClone)
	for _, c := range []*cobra.Command{dump, restore, clone} {
		c.Short = "Check, changing nothing, that " + c.Name() + " with these flags would start"
		c.Long = "Check, changing nothing, that pgsprint " + c.Name() + " with the same flags would start: see pgsprint preflight --help."
		c.Example = ""
	}
	cmd.AddCommand(dump, restore, clone)
	return cmd
}

// report prints the checklist on standard output and turns it into the
// exit status: a server that cannot be reached exits 3, a failed check 1.
func report(c *preflight.Checklist) error {
	if err := c.Print(os.Stdout); err != nil {
		return err
	}
	switch {
	case c.Usage != nil:
		return usageError{c.Usage}
	case c.Connect != nil:
		return c.Connect
	case !c.OK():
		return errNotReady
	}
	return nil
}

func preflightDump(ctx context.Context, o *dumpOptions) error {
	c, _, err := o.validate()
	if err != nil {
		return err
	}
	if _, err := o.encrypt.recipients(); err != nil {
		return err
	}
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	po := preflight.DumpOptions{Options: dump.Options{Source: cfg, File: o.file, Jobs: o.jobs, Codec: c, Filter: o.filter, Snapshot: o.snapshot,
		Overwrite: o.store.overwrite, Programs: &pgbin.Finder{}, Subset: o.spec, Mask: o.masking}}
	if location.IsURL(o.file) {
		if po.Output, err = location.Parse(o.file, o.store.options(nil, nil, nil)); err != nil {
			return usageError{err}
		}
	}
	if o.all.all {
		if o.conn.DSN == "" {
			cfg.Database = "postgres" // as dump --all
		}
		return report(preflight.DumpAll(ctx, po, listDatabases(cfg, "dump", o.all.exclude)))
	}
	return report(preflight.Dump(ctx, po))
}

// listDatabases lists the databases a whole-server run (verb) of the
// server src reaches would read, as the run chooses them.
func listDatabases(src *pgx.ConnConfig, verb string, exclude []string) preflight.ListFunc {
	return func(ctx context.Context, conn *pgx.Conn) ([]string, []archive.SkippedDatabase, error) {
		dbs, skipped, err := cluster.Databases(ctx, conn, src, verb, exclude)
		if errors.Is(err, cluster.ErrNoDatabase) {
			err = preflight.AsUsage(err)
		}
		return dbs, skipped, err
	}
}

func preflightRestore(ctx context.Context, o *restoreOptions) error {
	switch {
	case o.file == "":
		return usageError{fmt.Errorf("no archive file given: use -f FILE")}
	case o.list.print || o.toSQL:
		return usageError{fmt.Errorf("-l and --to-sql restore into no database: there is nothing to check")}
	}
	all := o.all.all || o.all.database != ""
	if all {
		if err := o.checkAll(); err != nil {
			return err
		}
	} else if err := o.validate(); err != nil {
		return err
	}
	ids, err := o.keys.identities()
	if err != nil {
		return err
	}
	o.ids = ids
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	if all && o.conn.DSN == "" {
		cfg.Database = "postgres" // as restore --all
	}
	po := preflight.RestoreOptions{Options: o.options(cfg, "", nil), SpillDir: o.spillDir, All: o.all.all, Database: o.all.database}
	if o.file != "-" {
		// Opened as the restore opens it (random access); a medium read
		// front to back is read, never changed.
		f, err := openArchive(ctx, o.file, o.store.options(nil, nil, nil), archive.OpenOptions{Access: archive.Parallel, SpillDir: o.spillDir, Identities: o.ids})
		if err != nil {
			po.ArchiveErr = err
		} else {
			defer f.Close()
			po.Archive, po.Where = f.Source, f.String()
			if m := f.Source.Manifest(); o.all.all && m.Globals != nil {
				if po.Roles, err = archiveRoles(f.Source, m.Globals.Stream); err != nil {
					po.ArchiveErr = err
				}
			}
		}
	}
	c := preflight.Restore(ctx, po)
	if c.Connect == nil && po.ArchiveErr != nil && exitCode(ctx, po.ArchiveErr) == exitConnection {
		c.Connect = po.ArchiveErr // an archive's store that cannot be reached
	}
	return report(c)
}

func preflightClone(ctx context.Context, o *cloneOptions) error {
	method, err := o.validate()
	if err != nil {
		return err
	}
	src, dst, err := o.configs(ctx)
	if err != nil {
		return err
	}
	po := preflight.CloneOptions{Options: o.options(src, dst, method, &watch{})}
	if o.all.all {
		if err := o.checkAll(); err != nil {
			return err
		}
		return report(preflight.CloneAll(ctx, po, listDatabases(src, "clone", o.all.exclude)))
	}
	fo, err := o.follow.options(*o, src, dst)
	if err != nil {
		return err
	}
	if fo != nil {
		f := &preflight.FollowOptions{Slot: fo.Names.Slot, Publication: fo.Names.Publication, Conninfo: fo.Conninfo,
			ReplicaIdentityFull: fo.ReplicaIdentityFull, SkipNoKey: fo.SkipNoKey}
		if f.Conninfo == "" {
			if src.Password != "" {
				f.ConninfoErr = follow.ErrConninfoPassword
			}
			f.Conninfo = pg.Conninfo(src)
		}
		po.Follow = f
	}
	c := preflight.Clone(ctx, po)
	if err := verdict.Failed(c.Items); errors.Is(err, clone.ErrSameDatabase) {
		if err := c.Print(os.Stdout); err != nil {
			return err
		}
		return usageError{err} // as clone says it
	}
	return report(c)
}

// archiveRoles lists the roles the globals (stream id) of a whole-server
// archive create, but a server journal (never restored).
func archiveRoles(src archive.Source, id uint32) ([]string, error) {
	r := src.OpenStream(id)
	defer r.Close()
	script, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read the archive's globals: %w", err)
	}
	roles, _, err := cluster.GlobalsObjects(string(script))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(roles, func(r string) bool { return r == journal.ClusterRole }), nil
}
