package dump

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// catalog is what the leader reads from the source inside the snapshot.
type catalog struct {
	tools        pgbin.Tools
	tables       []pg.TableInfo // whose rows are read
	filenodes    map[uint32]uint32
	chunks       [][]chunk.Chunk // per table: its ranges, one when not split
	sequences    []pg.SequenceInfo
	largeObjects []pg.LargeObjectInfo
	matviews     [][2]string
	schemas      []pg.Object // for restore's -n/-N
	relations    []pg.Object // for restore's -t/-T
}

// catalogSavepoint brackets the leader's catalog reads.
const catalogSavepoint = "pgsprint_catalog"

// readCatalog is listCatalog, waiting for a lock no longer than lockWait
// (pg_dump's --lock-wait-timeout; empty: as long as it takes). It leaves
// the leader holding no table lock: the reads run in a savepoint rolled
// back once their results are in hand, which releases the locks they took
// (pg_relation_size lets go at once, but EXPLAIN and the split queries
// keep theirs until the end of the (sub)transaction, and reading a
// sequence locks it). The leader then only keeps the snapshot alive: a
// lock it held for the run would make another session's ALTER or TRUNCATE
// wait for the end of the dump, and every query of the application on
// that table behind it; and it would need one lock slot per table beside
// pg_dump's. Readers lock each table as they read it (Reader.Lock).
func readCatalog(ctx context.Context, conn *pgx.Conn, srv pg.Server, split chunk.Options, sel filter.Options, lockWait string) (*catalog, error) {
	if _, err := conn.Exec(ctx, "SAVEPOINT "+catalogSavepoint); err != nil {
		return nil, fmt.Errorf("read the catalog: %w", pg.ExplainLost(err))
	}
	done, err := pg.LimitLockWait(ctx, conn, lockWait)
	if err != nil {
		return nil, err
	}
	c, err := listCatalog(ctx, conn, srv, split, sel)
	if err = done(err); err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+catalogSavepoint+"; RELEASE SAVEPOINT "+catalogSavepoint); err != nil {
		return nil, fmt.Errorf("release the catalog's locks: %w", pg.ExplainLost(err))
	}
	return c, nil
}

// listCatalog lists the tables to read, plans their chunks and reads the
// rest of the catalog, inside the snapshot.
func listCatalog(ctx context.Context, conn *pgx.Conn, srv pg.Server, split chunk.Options, sel filter.Options) (*catalog, error) {
	var c catalog
	var err error
	if c.tables, err = pg.ListTables(ctx, conn, srv); err != nil {
		return nil, err
	}
	var chosen *filter.Resolved
	if sel.Active() {
		if chosen, err = sel.Resolve(ctx, conn); err != nil {
			return nil, err
		}
		c.tables = keep(c.tables, func(t pg.TableInfo) bool {
			rel := filter.Rel{Schema: t.Schema, Name: t.Name}
			return chosen.Selected[rel] && !chosen.NoData[rel]
		})
	}
	if sel.NoRows() {
		c.tables = nil
	}
	if sel.NoUnloggedTableData {
		if c.tables, err = logged(ctx, conn, c.tables); err != nil {
			return nil, err
		}
	}
	if c.filenodes, err = filenodes(ctx, conn, c.tables); err != nil {
		return nil, err
	}
	// The sizes and split points are those of the snapshot's tables: a
	// table truncated or rewritten since is refused by its reader.
	for _, t := range c.tables {
		chunks, err := chunk.Split(ctx, conn, srv, t, split)
		if err != nil {
			return nil, err
		}
		c.chunks = append(c.chunks, chunks)
	}
	if c.sequences, err = pg.ListSequences(ctx, conn); err != nil {
		return nil, err
	}
	if sel.LargeObjects() {
		if c.largeObjects, err = pg.ListLargeObjects(ctx, conn); err != nil {
			return nil, err
		}
	}
	if c.matviews, err = pg.ListMatviews(ctx, conn); err != nil {
		return nil, err
	}
	if c.schemas, c.relations, err = pg.ListObjects(ctx, conn); err != nil {
		return nil, err
	}
	if chosen != nil {
		c.relations = keep(c.relations, func(o pg.Object) bool { return chosen.Selected[filter.Rel{Schema: o.Schema, Name: o.Name}] })
		c.sequences = keep(c.sequences, func(s pg.SequenceInfo) bool { return chosen.Selected[filter.Rel{Schema: s.Schema, Name: s.Name}] })
		c.matviews = keep(c.matviews, func(mv [2]string) bool { return chosen.Selected[filter.Rel{Schema: mv[0], Name: mv[1]}] })
	}
	if sel.NoRows() {
		// As pg_dump --schema-only: no sequence values (unless
		// --sequence-data), no refreshes.
		c.matviews = nil
		if !sel.SequenceData {
			c.sequences = nil
		}
	}
	return &c, nil
}

// logged drops the unlogged tables from tables (--no-unlogged-table-data:
// their definitions stay, their rows are not read).
func logged(ctx context.Context, conn *pgx.Conn, tables []pg.TableInfo) ([]pg.TableInfo, error) {
	oids := make([]uint32, len(tables))
	for i, t := range tables {
		oids[i] = t.OID
	}
	rows, err := conn.Query(ctx, `SELECT oid FROM pg_catalog.pg_class WHERE oid = ANY ($1::oid[]) AND relpersistence = 'u'`, oids)
	if err != nil {
		return nil, fmt.Errorf("list unlogged tables: %w", err)
	}
	unlogged := map[uint32]bool{}
	var oid uint32
	if _, err := pgx.ForEachRow(rows, []any{&oid}, func() error { unlogged[oid] = true; return nil }); err != nil {
		return nil, fmt.Errorf("list unlogged tables: %w", err)
	}
	return keep(tables, func(t pg.TableInfo) bool { return !unlogged[t.OID] }), nil
}

// filenodes returns the tables' pg_class.relfilenode in the snapshot, by
// OID: what Reader.Lock compares the current catalog's with.
func filenodes(ctx context.Context, conn *pgx.Conn, tables []pg.TableInfo) (map[uint32]uint32, error) {
	oids := make([]uint32, len(tables))
	for i, t := range tables {
		oids[i] = t.OID
	}
	rows, err := conn.Query(ctx, `SELECT oid, relfilenode FROM pg_catalog.pg_class WHERE oid = ANY ($1::oid[])`, oids)
	if err != nil {
		return nil, fmt.Errorf("read filenodes: %w", err)
	}
	m := make(map[uint32]uint32, len(tables))
	var oid, node uint32
	_, err = pgx.ForEachRow(rows, []any{&oid, &node}, func() error {
		m[oid] = node
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read filenodes: %w", err)
	}
	return m, nil
}

// keep returns the elements of s for which ok is true.
func keep[T any](s []T, ok func(T) bool) []T {
	var out []T
	for _, v := range s {
		if ok(v) {
			out = append(out, v)
		}
	}
	return out
}

// manifest lays out the archive's streams: 0 is the schema, then one per
// chunk (one or more per table), then one per large object. sizes holds
// each stream's estimated bytes, for largest-first scheduling.
func (c *catalog) manifest(srv pg.Server, snap *pg.Snapshot, tools pgbin.Tools, opts SessionOptions) (m *archive.Manifest, sizes map[uint32]int64) {
	sizes = make(map[uint32]int64)
	m = &archive.Manifest{
		ToolVersion:           opts.Version,
		ServerVersion:         srv.Version,
		ServerVersionNum:      srv.VersionNum,
		PgDumpVersion:         tools.Version,
		Database:              databaseName(srv, opts.Source),
		Encoding:              srv.Encoding,
		CopyEncoding:          srv.Encoding,
		Snapshot:              snap.ID,
		SnapshotTime:          snap.Time,
		BlockSize:             opts.BlockSize,
		MaxInterleave:         max(opts.Jobs, 1) + 1,
		SchemaStream:          0,
		DataOnly:              opts.Filter.DataOnly || opts.Filter.StatisticsOnly, // nothing to create
		StatisticsWithoutData: opts.Filter.NoRows() && opts.Filter.Statistics() && !opts.NoStatistics,
	}
	for _, o := range c.schemas {
		m.Schemas = append(m.Schemas, archive.Object{OID: o.OID, Name: o.Name})
	}
	for _, o := range c.relations {
		m.Relations = append(m.Relations, archive.Object{OID: o.OID, Schema: o.Schema, Name: o.Name, Kind: o.Kind})
	}
	next := uint32(1)
	for i, t := range c.tables {
		m.Tables = append(m.Tables, archive.Table{
			OID: t.OID, Filenode: c.filenodes[t.OID], Schema: t.Schema, Name: t.Name, Columns: t.Columns,
			Pages: t.Pages, SizeBytes: t.SizeBytes, Rows: t.Rows,
		})
		binary := t.BuiltinTypes && opts.BinaryForMajor == srv.Major()
		for _, ch := range c.chunks[i] {
			m.Chunks = append(m.Chunks, archive.Chunk{Stream: next, Table: i, Where: ch.Where, Keep: ch.Keep, Size: ch.Size, Binary: binary})
			sizes[next] = ch.Size
			next++
		}
	}
	for _, s := range c.sequences {
		m.Sequences = append(m.Sequences, archive.Sequence{Schema: s.Schema, Name: s.Name, LastValue: s.LastValue, IsCalled: s.IsCalled})
	}
	for _, lo := range c.largeObjects {
		alo := archive.LargeObject{Stream: next, OID: lo.OID, Owner: lo.Owner, HasACL: lo.HasACL, Comment: lo.Comment}
		for _, g := range lo.Grants {
			alo.ACL = append(alo.ACL, archive.Grant{Grantee: g.Grantee, Privilege: g.Privilege, Grantable: g.Grantable})
		}
		m.LargeObjects = append(m.LargeObjects, alo)
		next++
	}
	for _, mv := range c.matviews {
		m.Matviews = append(m.Matviews, archive.QualifiedRel{Schema: mv[0], Name: mv[1]})
	}
	m.Compact()
	return m, sizes
}

// databaseName is the name of the database a session reads, byte for byte
// as the caller connected to it (the server matches a connection's
// database name by its bytes), or else as current_database() says. Read
// through the session itself, a database whose encoding is not UTF8 shows
// its name (bytes in the shared catalog, often UTF8 written from another
// database) converted from its own encoding: "dbé" in a LATIN1 database
// reads "dbÃ©", which names no database.
func databaseName(srv pg.Server, source *pgx.ConnConfig) string {
	if source != nil && source.Database != "" {
		return source.Database
	}
	return srv.Database
}
