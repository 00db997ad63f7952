package cluster

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// DumpOptions configure a whole-server dump: a one-database dump's
// options, said once (Source reaches the database the others are listed
// from, and every database is read through the same settings; Filter
// applies in each; Jobs workers are shared by every database's data;
// Snapshot does not apply), and the databases to leave out.
type DumpOptions struct {
	dump.Options
	// ExcludeDatabases are pg_dumpall --exclude-database patterns.
	ExcludeDatabases []string
	// NoRolePasswords leaves the roles' passwords out, as pg_dumpall
	// --no-role-passwords (always so when pg_authid cannot be read).
	NoRolePasswords bool
}

// DumpResult summarises a whole-server dump.
type DumpResult struct {
	Databases       []string
	Skipped         []archive.SkippedDatabase
	NoRolePasswords bool
	dump.Result
}

// Dump writes the server's globals and every database it can read (not
// templates, not those refusing connections, not the excluded ones) into
// one archive. Each database is read in its own exported snapshot, taken
// one after the other: PostgreSQL has no snapshot across databases. All
// snapshots are held until the end, since the archive's header, written
// first, lists every database's streams; the data of every database is
// then read by one pool of Jobs workers, largest chunks first whatever
// their database, so that many small databases and one huge one keep every
// worker busy.
func Dump(ctx context.Context, opts DumpOptions) (*DumpResult, error) {
	start := time.Now()
	opts.Options = opts.WithDefaults()
	log := opts.Logger
	opts.Progress.Phase("catalog")
	src, err := openSource(ctx, opts.Source, opts.ExcludeDatabases, opts.Programs)
	if err != nil {
		return nil, err
	}
	defer src.close(ctx)
	conn, srv, tools, locks, dbs, skipped := src.conn, src.srv, src.tools, src.locks, src.dbs, src.skipped
	if len(dbs) == 0 {
		return nil, noDatabase("dump", opts.Source, skipped)
	}
	globals, noPasswords, err := readGlobals(ctx, conn, opts.Source, tools, opts.NoRolePasswords)
	if err != nil {
		return nil, err
	}
	if noPasswords && !opts.NoRolePasswords {
		log.Warn("cannot read pg_authid: roles are dumped without their passwords (as pg_dumpall --no-role-passwords); set them again after restoring")
	}
	res := &DumpResult{Skipped: skipped, NoRolePasswords: noPasswords}

	top := &archive.Manifest{
		ToolVersion: opts.Version, ServerVersion: srv.Version, ServerVersionNum: srv.VersionNum, PgDumpVersion: tools.Version,
		Encoding: srv.Encoding, SnapshotTime: time.Now(), BlockSize: opts.BlockSize, MaxInterleave: 2*opts.Jobs + 1,
		Globals: &archive.Globals{Stream: 0, NoRolePasswords: noPasswords, Skipped: skipped},
	}
	var sessions []*dump.Session
	defer func() {
		for _, s := range sessions {
			s.Close(ctx)
		}
	}()
	next := uint32(1) // stream 0 is the globals'
	var units []dump.Unit
	for _, d := range dbs {
		cfg := opts.Source.Copy()
		cfg.Database = d.name
		so := opts.SessionOptions(cfg)
		so.Locks = locks
		sess, err := dump.Begin(ctx, so)
		if err != nil {
			return nil, fmt.Errorf("database %s: %w", pg.Ident(d.name), err)
		}
		sessions = append(sessions, sess)
		next = sess.Renumber(next)
		m := sess.Manifest
		top.Databases = append(top.Databases, archive.Database{Name: d.name, SizeBytes: d.size, Owner: d.owner, Manifest: m})
		units = append(units, sess.Units()...)
		res.Databases = append(res.Databases, d.name)
		res.Tables += len(m.Tables)
		res.Chunks += len(m.Chunks)
		res.LargeObjects += len(m.LargeObjects)
		res.Sequences += len(m.Sequences)
		log.Info("database planned", "database", d.name, "tables", len(m.Tables), "chunks", len(m.Chunks), "snapshot", m.Snapshot)
	}
	// Largest first across databases; a stable sort keeps a database's
	// equal-sized units together, so that workers change database seldom.
	sort.SliceStable(units, func(i, j int) bool { return units[i].Size() > units[j].Size() })
	// The same plan as a dump of one database, summed: the chunks' and
	// large objects' estimates, which the disk check sizes the archive by.
	p := dump.PlanAll(sessions)
	opts.Progress.Begin(p)
	opts.Progress.Phase("data")

	a, err := dump.CreateArchive(ctx, opts.Options, top, p)
	if err != nil {
		return nil, err
	}
	defer a.Abort()
	if err := writeGlobals(a.Writer(), globals, opts.BlockSize); err != nil {
		return nil, err
	}
	wr, err := dump.Write(ctx, opts.Options, a, dump.Sessions{List: sessions, Units: units, PerDatabase: true})
	if err != nil {
		return nil, err
	}
	res.Rows, res.RawBytes, res.StoredBytes = wr.Rows, wr.RawBytes, wr.StoredBytes
	res.Elapsed = time.Since(start)
	return res, nil
}

// writeGlobals writes the globals script as stream 0.
func writeGlobals(w *archive.Writer, script []byte, blockSize int) error {
	bw := archive.NewBlockWriter(w.Stream(archive.KindSchema, 0), blockSize)
	if _, err := bw.Write(script); err != nil {
		return fmt.Errorf("write globals: %w", err)
	}
	if err := bw.Close(); err != nil {
		return fmt.Errorf("write globals: %w", err)
	}
	return nil
}
