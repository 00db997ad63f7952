package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/store/location"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// defaultCompression won the dump benchmark (docs/ARCHITECTURE.md): on
// COPY text, zstd level 1 through libzstd compresses about as well as
// level 3 for a third less CPU, and far better than gzip or lz4. zstd:auto
// (the level chosen frame by frame) is not the default: on TPC-H SF 1 with
// the server on the same 2 cores it took 10-30% longer for an archive
// under 1% smaller (docs/BENCHMARKS.md).
const defaultCompression = "zstd:1"

type dumpOptions struct {
	conn      connFlags
	log       logFlags
	file      string
	jobs      int
	compress  string
	blockSize int
	chunkSize sizeFlag
	splitBy   string
	profile   string
	progress  progressFlags
	filter    filter.Options
	lockWait  string
	snapshot  string
	compat    compatFlags
	noStats   bool // --no-statistics
	encrypt   encryptFlags
	store     storeFlags
	all       allDumpFlags
	rowFlags
}

// dumpCommand is dump's command with its flags, without RunE: dump itself and
// preflight dump take the same flags.
func dumpCommand() (*cobra.Command, *dumpOptions) {
	o := &dumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump -d SOURCE [-f FILE|-] [-j N] [-Z METHOD[:LEVEL]]",
		Short: "Dump a database into one archive file, in parallel",
		Long: `Dump a database into one pgsprint archive file.

Every worker reads the same exported snapshot, so the archive is one
consistent instant of the database. The schema comes from pg_dump; table
data, sequences and large objects are read by N parallel workers and
compressed in them. The file is written under a temporary name and renamed
only when complete.

Compression: by default zstd level 1 for every block; -Z zstd:LEVEL keeps
another level, as pg_dump -Z does (-Z zstd alone is zstd's default, 3), and
-Z lz4, gzip or none choose another method. -Z zstd:auto chooses the level
for each block from what the workers wait on: while they wait for rows
from the server, compressing harder costs little time and the level steps
up (to 9 at most), unless the machine's cores are busy (a server on the
same machine); when compressing holds them back, or the cores are full, it
steps down (to 1). The summary then says which levels were used, and list
shows "zstd auto". Restore reads any of them (a zstd frame needs no level
to decode).

-f s3://bucket/key uploads to object storage with a multipart upload
(--s3-uploads parts in flight), completed only after the archive's last
byte and aborted on any failure or interrupt, so the object appears only
whole. An existing object is refused unless --overwrite. Credentials,
region and endpoint come from the standard AWS chain (environment,
~/.aws files, AWS_PROFILE, web identity, instance and container roles);
--s3-endpoint or AWS_ENDPOINT_URL for MinIO, Ceph, R2 and other
S3-compatible stores.

Locks: pg_dump holds ACCESS SHARE on every table while it reads the schema
(as long as pg_dump -Fc would at its start); after that, each worker holds
only the table it is copying. Another session's ALTER, TRUNCATE or DROP on
a table already read goes ahead at once; on a table not yet read it stops
the dump with one line naming the table and the session or what changed
(never a silent wrong read): run again.

--all dumps the whole server: the globals as pg_dumpall --globals-only
writes them (roles, their settings and memberships, tablespaces; without
passwords, and a warning, when pg_authid cannot be read) and every database
that allows connections, templates excepted (--exclude-database PATTERN
leaves more out), each with its owner, encoding, locale, privileges and
settings. -d names the database to connect to first (default postgres).
Each database is read in its own exported snapshot, taken one after the
other when the dump starts: PostgreSQL has no snapshot across databases,
so the archive is one consistent instant of each database, not of the
server. One connection per database holds its snapshot until the end; the
-j workers are shared by every database's tables, largest first.`,
		Example: `  pgsprint dump -d mydb -f mydb.pgs
  pgsprint dump -d "postgresql://app@db1/prod" -f prod.pgs -j 8 -Z zstd:6
  PGPASSWORD=... pgsprint dump -h db1 -U app -d prod -f prod.pgs -Z lz4
  pgsprint dump -d prod -f - | ssh backup 'cat > prod.pgs'
  pgsprint dump -d prod -f s3://backups/prod/2024-06-01.pgs -j 8
  AWS_PROFILE=minio pgsprint dump -d prod -f s3://backups/prod.pgs --s3-endpoint http://10.0.0.5:9000 --overwrite
  pgsprint dump -d prod -f app.pgs -n app -T 'app.log_*' --exclude-table-data app.audit
  pgsprint dump -d prod -f rows.pgs --data-only -t 'app.order*'
  pgsprint dump -d prod -f part.pgs --filter objects.txt   # pg_dump 17's filter file: include/exclude table|schema|...
  pgsprint dump -d prod -f m.pgs --table-and-children app.measurements --no-comments
  pgsprint dump -d prod -f prod.pgs --encrypt-to age1... --encrypt-to-file backup-keys.txt
  pgsprint dump -d prod -f dev.pgs --subset "app.orders: created > now() - interval '30 days'" --subset-children
  pgsprint dump --all -f server.pgs -j 8 --exclude-database 'scratch*'   # the whole server`,
		Args: noArgs,
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	o.conn.register(fs)
	fs.StringVarP(&o.file, "file", "f", "", `archive file to write, or s3://bucket/key; "-" or none for standard output`)
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel workers")
	fs.StringVarP(&o.compress, "compress", "Z", defaultCompression, "compression: zstd, lz4, gzip or none, with an optional :LEVEL; zstd:auto chooses the level as the dump goes")
	fs.IntVar(&o.blockSize, "block-size", archive.DefaultBlockSize, "raw bytes per compressed block")
	o.chunkSize = chunk.DefaultSize
	fs.Var(&o.chunkSize, "chunk-size", "split tables larger than this into chunks of about this size, read in parallel (0: never split)")
	fs.StringVar(&o.splitBy, "split-by", string(chunk.Auto), "how to split big tables: auto (ctid ranges on PostgreSQL 14+, else integer key ranges), ctid or key")
	fs.StringVar(&o.profile, "cpu-profile", "", "write a Go CPU profile of the dump to this file")
	_ = fs.MarkHidden("cpu-profile")
	registerFilterFlags(fs, &o.filter, "dump")
	fs.StringVar(&o.lockWait, "lock-wait-timeout", "", "fail instead of waiting longer than this for a table lock while the catalog is read and while pg_dump locks the tables (e.g. 30s, 500ms, 2min; a bare number is milliseconds; as pg_dump); readers never wait: another session's DDL on a table not yet read stops the run at once, naming it")
	fs.StringArrayVar(&o.filter.ExcludeTableData, "exclude-table-data", nil, "dump the definition but not the rows of tables matching this pattern")
	fs.StringVar(&o.snapshot, "snapshot", "", "read the database in this exported snapshot (e.g. a replication slot's) instead of exporting one; it must stay held until the dump ends")
	o.compat = compatFlags{cmd: "dump"}
	o.compat.register(fs, &o.filter)
	fs.BoolVar(&o.noStats, "no-statistics", false, "do not carry optimizer statistics (carried by default when pg_dump is 18 or later; restore into 18+ then skips ANALYZE)")
	o.encrypt.register(fs)
	o.store.register(fs, true)
	o.all.register(fs)
	o.registerRows(fs)
	o.progress.register(fs)
	o.log.register(fs)
	return cmd, o
}

// check applies and checks the flags that need the parsed flag set.
func (o *dumpOptions) check(cmd *cobra.Command) error {
	if err := o.compat.apply(cmd.Flags(), &o.filter, false); err != nil {
		return err
	}
	return o.applyRows(cmd.Flags())
}

func runDump(ctx context.Context, o dumpOptions) error {
	if o.file == "" {
		o.file = "-" // like pg_dump: no -f means standard output
	}
	if err := notTerminal(o.file, os.Stdout); err != nil {
		return err
	}
	c, method, err := o.validate()
	if err != nil {
		return err
	}
	if o.file != "-" && !location.IsURL(o.file) {
		dir, partial := tempfile.Partial(o.file)
		removeStale(o.log.logger(), dir, partial)
	}
	recipients, err := o.encrypt.recipients()
	if err != nil {
		return err
	}
	cfg, err := o.conn.config(ctx)
	if err != nil {
		return err
	}
	if o.profile != "" {
		stop, err := startCPUProfile(o.profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	w, err := o.progress.start("dump", o.log)
	if err != nil {
		return err
	}
	defer w.stop()
	dopts := dump.Options{
		Source: cfg, File: o.file, Stdout: os.Stdout, Jobs: o.jobs, Codec: c, BlockSize: o.blockSize,
		Split:   chunk.Options{ChunkSize: int64(o.chunkSize), Method: method},
		Version: version, Logger: o.log.logger(), Progress: w.reporter, Filter: o.filter, LockWaitTimeout: o.lockWait, Snapshot: o.snapshot, SerializableDeferrable: o.compat.serialDef,
		NoStatistics: o.noStats, Recipients: recipients, Location: o.store.options(nil, nil, o.log.logger()), Overwrite: o.store.overwrite,
		Programs: &pgbin.Finder{}, Subset: o.spec, Mask: o.masking,
	}
	var res *dump.Result
	if o.all.all {
		res, err = runDumpAll(ctx, o.all, o.conn, dopts, w.textOut(o.log))
	} else {
		res, err = dump.Run(ctx, dopts)
	}
	if err != nil {
		return err
	}
	s := w.tracker.Summary()
	s.Target = o.file
	if s.Target == "-" {
		s.Target = "standard output"
	}
	s.Tables, s.Chunks, s.Rows, s.Sequences, s.LargeObj = res.Tables, res.Chunks, res.Rows, res.Sequences, res.LargeObjects
	s.RawBytes, s.StoredBytes, s.Codec = res.RawBytes, res.StoredBytes, c.Name()
	if a, ok := c.(*codec.ZstdAuto); ok {
		s.Codec = a.Describe()
	}
	if res.Chunks > 0 {
		s.CopyFormat = "text" // archives hold COPY text (archive.Chunk.Binary is clone's)
	}
	s.WallSeconds = res.Elapsed.Seconds()
	return w.finish(s)
}

// validate refuses, before anything is touched, flags a dump cannot run
// with (usage errors), and parses the compression and the split method.
func (o *dumpOptions) validate() (codec.Codec, chunk.Method, error) {
	if o.file == "" {
		o.file = "-" // like pg_dump: no -f means standard output
	}
	if err := o.store.check(); err != nil {
		return nil, "", err
	}
	if o.file != "-" && !location.IsURL(o.file) {
		if st, err := os.Stat(o.file); err == nil && st.IsDir() {
			return nil, "", usageError{fmt.Errorf("-f %s is a directory: give the archive's file name, e.g. -f %s", o.file, filepath.Join(o.file, "NAME.pgs"))}
		}
	}
	if err := checkJobs(o.jobs); err != nil {
		return nil, "", err
	}
	if err := o.all.check(o.snapshot); err != nil {
		return nil, "", err
	}
	if err := checkLockWait(o.lockWait); err != nil {
		return nil, "", err
	}
	if err := o.filter.Check(); err != nil {
		return nil, "", usageError{err}
	}
	if err := o.checkRows(o.all.all, false, false, o.filter.Selection, o.compat.statistics); err != nil {
		return nil, "", err
	}
	c, err := codec.Parse(o.compress)
	if err != nil {
		return nil, "", usageError{err}
	}
	method, err := chunk.ParseMethod(o.splitBy)
	if err != nil {
		return nil, "", usageError{err}
	}
	return c, method, nil
}

// allDumpFlags are dump's whole-server flags.
type allDumpFlags struct {
	all         bool
	exclude     []string
	noPasswords bool
	// pg_dumpall's parts alone, refused
	globalsOnly, rolesOnly, tablespacesOnly bool
}

func (a *allDumpFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&a.all, "all", false, "dump the whole server: globals (roles, tablespaces) and every database, in one archive (see above)")
	fs.StringArrayVar(&a.exclude, "exclude-database", nil, "with --all: do not dump databases matching this pattern (as pg_dumpall; repeatable)")
	fs.BoolVar(&a.noPasswords, "no-role-passwords", false, "with --all: leave the roles' passwords out (as pg_dumpall)")
	fs.BoolVarP(&a.globalsOnly, "globals-only", "g", false, "not taken: use pg_dumpall (see docs/guide/pg-dump-flags.md)")
	fs.BoolVarP(&a.rolesOnly, "roles-only", "r", false, "not taken: use pg_dumpall (see docs/guide/pg-dump-flags.md)")
	fs.BoolVar(&a.tablespacesOnly, "tablespaces-only", false, "not taken: use pg_dumpall (see docs/guide/pg-dump-flags.md)")
}

func (a *allDumpFlags) check(snapshot string) error {
	switch {
	case a.globalsOnly || a.rolesOnly || a.tablespacesOnly:
		return usageError{fmt.Errorf("--globals-only, --roles-only and --tablespaces-only are not supported by pgsprint: the globals alone are a short script " +
			"with no table data for pgsprint to move in parallel: use pg_dumpall --globals-only (pgsprint --all archives carry them with every database)")}
	case !a.all && len(a.exclude) > 0:
		return usageError{fmt.Errorf("--exclude-database applies to --all only")}
	case !a.all && a.noPasswords:
		return usageError{fmt.Errorf("--no-role-passwords applies to --all only")}
	case a.all && snapshot != "":
		return usageError{fmt.Errorf("--all does not take --snapshot: each database is read in its own snapshot")}
	}
	return nil
}

// runDumpAll is dump --all, with the one-database dump's options.
func runDumpAll(ctx context.Context, a allDumpFlags, conn connFlags, o dump.Options, out io.Writer) (*dump.Result, error) {
	if conn.DSN == "" {
		o.Source.Database = "postgres"
	}
	res, err := cluster.Dump(ctx, cluster.DumpOptions{Options: o, ExcludeDatabases: a.exclude, NoRolePasswords: a.noPasswords})
	if errors.Is(err, cluster.ErrNoDatabase) {
		return nil, usageError{err}
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "databases: %s\n", strings.Join(res.Databases, ", "))
	if len(res.Skipped) > 0 {
		var s []string
		for _, d := range res.Skipped {
			s = append(s, fmt.Sprintf("%s (%s)", d.Name, d.Reason))
		}
		fmt.Fprintf(out, "skipped: %s\n", strings.Join(s, ", "))
	}
	return &res.Result, nil
}
