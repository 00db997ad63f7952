package restore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// loader runs the data stage's tasks: it loads chunks and large objects
// from the source into the target, each in a transaction with its journal
// row, and checks what it loaded against the source's totals.
type loader struct {
	opts    Options
	ar      archive.Source    // the source, counting for progress
	indexed bool              // ar knew all its streams before any was read
	demuxed bool              // ar is a pipe's streams taken apart as they arrive
	m       *archive.Manifest // the selection's
	target  *pgx.ConnConfig
	j       *journal.Journal
}

// connectWorker opens a worker connection with settings that need no
// server change. synchronous_commit=off is safe here: a crash mid-restore
// means restoring again anyway. maintenance_work_mem is what index builds
// sort in; parallel maintenance workers let one large index build use the
// cores that other work leaves idle.
func (r *loader) connectWorker(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return nil, err
	}
	setup := "SET synchronous_commit TO off"
	if r.opts.MaintenanceWorkMem != "" {
		setup += "; SET maintenance_work_mem TO " + pg.Literal(r.opts.MaintenanceWorkMem)
	}
	setup += fmt.Sprintf("; SET max_parallel_maintenance_workers TO %d", min(max(r.opts.Jobs-1, 1), 8))
	if r.opts.DisableTriggers {
		// Triggers and foreign key checks off for the loads, as
		// pg_restore --disable-triggers; the server allows it to
		// superusers only, and says so.
		setup += "; SET session_replication_role TO replica"
	}
	if _, err := conn.Exec(ctx, setup); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("set up restore session: %w", err)
	}
	return conn, nil
}

func (r *loader) tableName(c *archive.Chunk) string {
	t := r.m.Tables[c.Table]
	return pg.Qualified(t.Schema, t.Name)
}

// copyIn is the statement that loads one chunk of table t: text in the
// archive's encoding enc (the source's server encoding), which the server
// converts into its own as it does for pg_restore (which sets
// client_encoding instead), or binary.
func copyIn(t archive.Table, c *archive.Chunk, enc string) pg.Copy {
	return pg.Copy{Schema: t.Schema, Table: t.Name, Columns: t.Columns, Binary: c.Binary, Encoding: enc}
}

// load is the payload of a data task.
type load struct {
	// chunks is one chunk, or every chunk of a table, loaded in one
	// transaction (a whole-table load: dataStage.wholeTable).
	chunks []*archive.Chunk
	los    []*archive.LargeObject // a batch of large objects (loadLargeObjects)
	freeze bool                   // the table's only load: TRUNCATE + COPY FREEZE
	split  *splitLoad             // one of several connections sharing the chunk
}

// chunkStep is the journal step of loading one stream (a chunk or a large
// object): stream numbers are fixed by the archive.
func chunkStep(stream uint32) string { return fmt.Sprintf("load stream %d", stream) }

// loadChunks streams chunks of one table, blocks checked and decompressed,
// into COPY, one COPY per chunk, in one transaction that also records each
// chunk in the journal: it commits with every row and its journal rows, or
// not at all. The row count the server reports for each chunk must equal
// the one the dump recorded before it commits.
//
// With freeze, the table was created by this restore and this is its only
// load: TRUNCATE in the same transaction lets COPY FREEZE write rows
// already frozen and visible to all, so nothing has to set hint bits or
// freeze them later (and it wipes whatever an interrupted run left). If
// TRUNCATE is not allowed (the table belongs to another role), it loads as
// usual.
//
// then is run after the COPYs in the same transaction, before its COMMIT
// (a small table's fused index, constraint and ANALYZE tasks with their
// journal steps: engine.fusedSQL).
func (r *loader) loadChunks(ctx context.Context, conn *pgx.Conn, cs []*archive.Chunk, freeze bool, then tail) (int64, error) {
	name := r.tableName(cs[0])
	enc := r.m.DataEncoding()
	current := cs[0].Stream // the stream being loaded, for the error
	pieces := make([]piece, len(cs))
	for i, c := range cs {
		pieces[i] = piece{
			stmt: copyIn(r.m.Tables[c.Table], c, enc),
			open: func() io.ReadCloser {
				current = c.Stream
				return r.ar.OpenStream(c.Stream)
			},
			check: func(n int64) error { return r.checkRows(c, n) },
			step:  chunkStep(c.Stream),
		}
	}
	n, err := r.copyInTx(ctx, conn, name, pieces, freeze, then)
	if err == errNoFreeze {
		// Refused before any stream was opened: they are all unread.
		n, err = r.copyInTx(ctx, conn, name, pieces, false, then)
	}
	if err != nil {
		return 0, fmt.Errorf("restore table %s (stream %d): %w", name, current, pg.ExplainLost(err))
	}
	return n, nil
}

// failedReader remembers the first error its reader returned other than
// io.EOF. When the archive cannot be read, pgx ends the COPY with
// CopyFail and reports the server's answer ("COPY from stdin failed: ...",
// SQLSTATE 57014), which holds the archive's error only as text: cause
// gives back the archive's error itself, which the caller can match
// (archive.ErrCorrupt) and the user reads without the server's wrapping.
// pgconn reads in a goroutine of its own, which it does not always wait
// for when the connection fails: err is behind a mutex.
type failedReader struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (f *failedReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil && err != io.EOF {
		f.mu.Lock()
		if f.err == nil {
			f.err = err
		}
		f.mu.Unlock()
	}
	return n, err
}

// cause is the reader's error if it had one, else err.
func (f *failedReader) cause(err error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	return err
}

// tail is work a load's transaction does after its COPY: statements, and
// the journal steps they complete, recorded with the load's own in one
// INSERT.
type tail struct {
	sql   []string
	steps []string
}

// errNoFreeze says TRUNCATE was refused, so COPY FREEZE cannot be used.
var errNoFreeze = errors.New("no privilege to truncate")

// piece is one stream a load's transaction copies in, with the statement
// that loads it, the check of its row count and its journal step. The
// stream is opened only when its COPY starts, so that a transaction that
// fails before it leaves it unread.
type piece struct {
	stmt  pg.Copy
	open  func() io.ReadCloser
	check func(int64) error
	step  string
}

// copyInTx runs [TRUNCATE +] one COPY per piece + journal rows in one
// transaction (FREEZE is added to each COPY when freezing). A piece's
// check sees its loaded row count before COMMIT: it is called only after
// its stream has been read to its end, when a pipe's totals are known too.
// It returns the rows loaded.
func (r *loader) copyInTx(ctx context.Context, conn *pgx.Conn, name string, pieces []piece, freeze bool, then tail) (int64, error) {
	// BEGIN goes with the first COPY (or with TRUNCATE), the journal rows
	// with COMMIT: two round trips per chunk (three with TRUNCATE) rather
	// than five, which for a small table are most of its load. TRUNCATE
	// has a round trip of its own: refused, the load goes on without
	// FREEZE and must find the streams unread.
	done := false
	defer func() {
		if !done {
			conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	begin := "BEGIN; "
	if freeze {
		if _, err := conn.Exec(ctx, "BEGIN; TRUNCATE ONLY "+name); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "42501" {
				return 0, errNoFreeze
			}
			return 0, err
		}
		begin = ""
	}
	var rows int64
	steps := make([]string, 0, len(pieces)+len(then.steps))
	for _, p := range pieces {
		stmt := p.stmt
		stmt.Freeze = freeze
		n, err := copyPiece(ctx, conn, begin+stmt.From(), p)
		if err != nil {
			return 0, err
		}
		begin = ""
		rows += n
		steps = append(steps, p.step)
	}
	var end strings.Builder
	for _, t := range then.sql {
		end.WriteString(t + ";\n")
	}
	end.WriteString(r.j.RecordSQL(append(steps, then.steps...)...) + ";\nCOMMIT")
	if _, err := conn.Exec(ctx, end.String()); err != nil {
		return 0, fmt.Errorf("record step %q in the restore journal and commit: %w", steps[0], err)
	}
	done = true
	return rows, nil
}

// copyPiece runs one COPY of a load's transaction (the simple query
// "BEGIN; COPY ... FROM STDIN" runs BEGIN, then takes the COPY's data; the
// tag is the last command's, the COPY's) and checks its row count.
func copyPiece(ctx context.Context, conn *pgx.Conn, copySQL string, p piece) (int64, error) {
	s := p.open()
	defer s.Close()
	fr := &failedReader{r: s}
	tag, err := conn.PgConn().CopyFrom(ctx, fr, copySQL)
	if err != nil {
		return 0, fr.cause(err)
	}
	if err := p.check(tag.RowsAffected()); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// Large objects are restored in batches, one transaction each (with a
// journal row per object): one transaction, one task and a few round trips
// per object made 100,000 small ones take minutes. A batch ends after
// loBatchObjects objects or once it holds loBatchBytes.
const (
	loBatchObjects = 1000
	loBatchBytes   = 64 << 20
)

// batchLargeObjects cuts los into batches, in order; a batch's size is its
// objects' sizes summed (estimate gives one object's).
func batchLargeObjects(los []archive.LargeObject, estimate func(*archive.LargeObject) int64) (batches [][]*archive.LargeObject, sizes []int64) {
	var cur []*archive.LargeObject
	var size int64
	for i := range los {
		lo := &los[i]
		cur = append(cur, lo)
		size += estimate(lo)
		if len(cur) >= loBatchObjects || size >= loBatchBytes {
			batches, sizes = append(batches, cur), append(sizes, size)
			cur, size = nil, 0
		}
	}
	if len(cur) > 0 {
		batches, sizes = append(batches, cur), append(sizes, size)
	}
	return batches, sizes
}

// loadLargeObjects recreates a batch of large objects with their OIDs,
// contents, owners, privileges and comments, in one transaction that also
// records each in the journal: all of them commit, or none. Objects an
// earlier run restored (the journal says so) are skipped. Small objects
// (under 1 MiB) are created by lo_from_bytea in multi-statement queries
// of about loScriptBytes, so that a batch costs a few round trips rather
// than several per object; larger ones are written 1 MiB at a time.
func (r *loader) loadLargeObjects(ctx context.Context, conn *pgx.Conn, los []*archive.LargeObject) error {
	const loScriptBytes = 4 << 20
	var first, last uint32 // the objects of the statements being run, for the error
	buf := make([]byte, 1<<20)
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var script strings.Builder
		flush := func() error {
			if script.Len() == 0 {
				return nil
			}
			_, err := tx.Conn().PgConn().Exec(ctx, script.String()).ReadAll()
			script.Reset()
			return err
		}
		for _, lo := range los {
			step := chunkStep(lo.Stream)
			if r.j.IsDone(step) {
				continue
			}
			if script.Len() == 0 {
				first = lo.OID
			}
			last = lo.OID
			script.WriteString(r.j.RecordSQL(step) + ";\n")
			if r.opts.Clean {
				fmt.Fprintf(&script, "SELECT pg_catalog.lo_unlink(oid) FROM pg_catalog.pg_largeobject_metadata WHERE oid = %d;\n", lo.OID)
			}
			if err := r.writeContents(ctx, tx, lo, buf, &script, flush, &first); err != nil {
				return err
			}
			for _, stmt := range largeObjectMetadata(lo, r.opts.NoOwner, r.opts.NoACL) {
				script.WriteString(stmt + ";\n")
			}
			if script.Len() >= loScriptBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	switch {
	case err == nil:
		return nil
	case first == last:
		return fmt.Errorf("restore large object %d: %w", first, err)
	}
	return fmt.Errorf("restore large objects %d to %d: %w", first, last, err)
}

// writeContents creates a large object with its contents: in the script
// with lo_from_bytea if it is under 1 MiB, else (after running the script
// so far) with lo_create and lo_put 1 MiB at a time, so that a large one
// never sits whole in memory. buf is the caller's 1 MiB buffer.
func (r *loader) writeContents(ctx context.Context, tx pgx.Tx, lo *archive.LargeObject, buf []byte, script *strings.Builder, flush func() error, first *uint32) error {
	s := r.ar.OpenStream(lo.Stream)
	defer s.Close()
	n, err := io.ReadFull(s, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		fmt.Fprintf(script, "SELECT pg_catalog.lo_from_bytea(%d, pg_catalog.decode('%s', 'hex'));\n", lo.OID, hex.EncodeToString(buf[:n]))
		return nil
	}
	if err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	*first = lo.OID
	if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_create($1)", lo.OID); err != nil {
		return err
	}
	for off := int64(0); ; {
		if n > 0 {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.lo_put($1, $2, $3)", lo.OID, off, buf[:n]); err != nil {
				return err
			}
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return err
		}
		n, err = io.ReadFull(s, buf)
	}
}

// largeObjectMetadata returns the statements pg_dump would emit for a large
// object's owner, privileges and comment.
func largeObjectMetadata(lo *archive.LargeObject, noOwner, noACL bool) []string {
	obj := fmt.Sprintf("LARGE OBJECT %d", lo.OID)
	var stmts []string
	if !noOwner && lo.Owner != "" {
		stmts = append(stmts, fmt.Sprintf("ALTER %s OWNER TO %s", obj, pg.Ident(lo.Owner)))
	}
	if !noACL && lo.HasACL {
		stmts = append(stmts, fmt.Sprintf("REVOKE ALL ON %s FROM PUBLIC", obj))
		if lo.Owner != "" {
			stmts = append(stmts, fmt.Sprintf("REVOKE ALL ON %s FROM %s", obj, pg.Ident(lo.Owner)))
		}
		for _, g := range lo.ACL {
			if g.Privilege != "SELECT" && g.Privilege != "UPDATE" {
				// Large objects have no other privileges; anything else is a
				// damaged or forged archive, and must not reach SQL text.
				continue
			}
			to := "PUBLIC"
			if g.Grantee != "" {
				to = pg.Ident(g.Grantee)
			}
			stmt := fmt.Sprintf("GRANT %s ON %s TO %s", g.Privilege, obj, to)
			if g.Grantable {
				stmt += " WITH GRANT OPTION"
			}
			stmts = append(stmts, stmt)
		}
	}
	if lo.Comment != nil {
		stmts = append(stmts, fmt.Sprintf("COMMENT ON %s IS %s", obj, pg.Literal(*lo.Comment)))
	}
	return stmts
}

// plannedBytes is a stream's raw size for scheduling: exact when the
// source already knows it (a seekable archive's footer), else the
// manifest's estimate (a pipe or a live source knows a stream's size only
// at its end): the table's relation size shared by its chunks, or the
// large object's size.
func (r *loader) plannedBytes(id uint32, estimate int64) int64 {
	if info, ok := r.ar.Stream(id); ok {
		return info.RawBytes
	}
	return estimate
}

// missing reports a stream a seekable archive does not have: its footer
// is complete, so the archive is damaged or forged.
func (r *loader) missing(id uint32) bool {
	if !r.indexed {
		return false
	}
	_, found := r.ar.Stream(id)
	return !found
}

// checkRows compares the rows a chunk loaded with those its source
// delivered, known once the stream has been read to its end. Its error
// names no table: its callers wrap it in "restore table T (stream N)".
func (r *loader) checkRows(c *archive.Chunk, loaded int64) error {
	info, ok := r.ar.Stream(c.Stream)
	if !ok {
		return fmt.Errorf("the archive's stream %d ended without its totals (the archive is damaged: check it with pgsprint verify)", c.Stream)
	}
	if loaded != info.Rows {
		if r.m.DataOnly && !r.opts.DisableTriggers {
			return fmt.Errorf("loaded %d rows, archive holds %d: a trigger on the target table kept rows out (restore with --disable-triggers, or drop the trigger)", loaded, info.Rows)
		}
		return fmt.Errorf("loaded %d rows, archive holds %d", loaded, info.Rows)
	}
	return nil
}
