// Package sqlscript writes an archive as one plain SQL script that psql
// loads with no pgsprint installed: the escape hatch for when pgsprint is
// not available where the data must go. pg_restore writes the schema;
// table data becomes COPY ... FROM stdin blocks, as in pg_dump's plain
// format.
//
// The script is all or nothing, as pg_restore --single-transaction: it
// sets ON_ERROR_STOP and opens a transaction at its top, and writes COMMIT
// only after every stream it holds has been read to its end and every
// checksum and row count has held. A COPY block only ever receives whole
// rows. If the archive turns out damaged half-way, the block is ended
// after its last whole row and a statement that raises an error follows,
// so psql stops and the transaction rolls back; if pgsprint dies instead,
// the script just ends without COMMIT, and the server rolls the
// transaction back when psql's session ends.
package sqlscript

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// Options configure the script.
type Options struct {
	// Settings are restore's: a script leaves out ownership with NoOwner
	// and privileges with NoACL, as pg_restore --no-owner and
	// --no-privileges; the others do not apply to a script.
	restore.Settings
	// Selection, when set, writes only that part of the archive (restore
	// -n/-t/--schema-only/--data-only with --to-sql).
	Selection *restore.Selection
	// ToolArgs are pg_restore flags that leave kinds of objects out
	// (--no-comments and the like: filter.Options.PgRestoreArgs).
	ToolArgs []string
	// Role, when set, is SET at the top of the script, as pg_restore
	// --role writes it.
	Role string
}

// loChunk is how many bytes of a large object go in one lo_put call.
const loChunk = 256 << 10

// Write writes the archive ar as a SQL script to out: in one transaction,
// pre-data, every table's rows, large objects, sequence values, post-data,
// then refreshes of the populated materialized views.
func Write(ctx context.Context, ar archive.Source, out io.Writer, o Options) error {
	m := ar.Manifest()
	if o.Selection != nil {
		m = o.Selection.Manifest
	}
	tools, schema, cleanup, err := restore.SchemaFile(ctx, ar)
	if err != nil {
		return err
	}
	defer cleanup()
	w := bufio.NewWriterSize(out, 1<<20)
	fmt.Fprintf(w, "--\n-- pgsprint %s script: one transaction, committed at its end only if\n"+
		"-- pgsprint read and checked the whole archive. Load it with psql.\n--\n\n"+
		"\\set ON_ERROR_STOP on\nBEGIN;\n\n", m.ToolVersion)
	if o.Role != "" {
		fmt.Fprintf(w, "SET ROLE %s;\n\n", pg.Ident(o.Role))
	}
	sw := &script{w: w}
	if err := sw.body(ctx, ar, m, tools, schema, o); err != nil {
		sw.abort(err)
		if ferr := w.Flush(); ferr != nil {
			return fmt.Errorf("%w (and writing the script: %v)", err, ferr)
		}
		return err
	}
	w.WriteString("\nCOMMIT;\n")
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write SQL script: %w", err)
	}
	return nil
}

// script is the writing of a script's transaction.
type script struct {
	w      *bufio.Writer
	inCopy bool // inside a COPY block: only rows, or its end, may follow
}

// body writes everything between BEGIN and COMMIT. The setvals come after
// the last stream is read: unlike the rest, they do not roll back.
func (s *script) body(ctx context.Context, ar archive.Source, m *archive.Manifest, tools pgbin.Tools, schema string, o Options) error {
	w := s.w
	// A --data-only archive's script loads rows into existing tables, as
	// pg_dump --data-only's does: its schema stream is not part of it.
	if !m.DataOnly {
		if err := pgRestore(ctx, tools, schema, w, o, "--section=pre-data"); err != nil {
			return err
		}
	}
	// The script's own SQL (names from the manifest) is UTF8, as is
	// pg_dump's schema (SQL_ASCII stays as stored); each COPY names the
	// encoding of its data, the source's, for the server to convert.
	enc := "UTF8"
	if m.Encoding == "SQL_ASCII" {
		enc = "SQL_ASCII"
	}
	fmt.Fprintf(w, "\n--\n-- Data written by pgsprint from a %s archive\n--\n\nSET client_encoding = %s;\n", m.ToolVersion, pg.Literal(enc))
	for i := range m.Chunks {
		if err := s.writeChunk(ar, m, &m.Chunks[i]); err != nil {
			return err
		}
	}
	for i := range m.LargeObjects {
		if err := writeLargeObject(w, ar, &m.LargeObjects[i], o); err != nil {
			return err
		}
	}
	// A source that knows only at its end whether all it delivered was
	// sound (an archive read from a pipe) is asked before anything commits.
	if f, ok := ar.(archive.Finisher); ok {
		if err := f.Finish(); err != nil {
			return err
		}
	}
	for _, sq := range m.Sequences {
		name := pg.Qualified(sq.Schema, sq.Name)
		fmt.Fprintf(w, "SELECT pg_catalog.setval(%s, %d, %t);\n", pg.Literal(name), sq.LastValue, sq.IsCalled)
	}
	fmt.Fprintln(w)
	if !m.DataOnly {
		if err := pgRestore(ctx, tools, schema, w, o, "--section=post-data"); err != nil {
			return err
		}
	}
	for _, mv := range m.Matviews {
		fmt.Fprintf(w, "REFRESH MATERIALIZED VIEW %s;\n", pg.Qualified(mv.Schema, mv.Name))
	}
	return nil
}

// abort ends a script whose archive could not be read to its end: the open
// COPY block (which holds whole rows only) is ended, and a statement that
// fails stops psql (ON_ERROR_STOP) and aborts the transaction, so nothing
// of the script commits even if it is loaded in a way that would commit
// at its end (psql --single-transaction). No COMMIT follows.
func (s *script) abort(cause error) {
	if s.inCopy {
		s.w.WriteString("\\.\n")
	}
	// The message is a dollar-quoted string: keep '$' out of it.
	msg := strings.ReplaceAll("pgsprint could not read the archive to its end, this script is incomplete and nothing of it is committed: "+cause.Error(), "$", "?")
	fmt.Fprintf(s.w, "\n-- The archive is damaged or was cut short: pgsprint stopped here.\nDO $pgsprint$BEGIN RAISE EXCEPTION USING MESSAGE = %s; END$pgsprint$;\n", pg.Literal(msg))
}

// writeChunk writes one chunk as a COPY block. Its rows pass through
// rowWriter, so that whatever happens the block holds whole rows only, and
// they must be exactly the rows the dump counted.
func (s *script) writeChunk(ar archive.Source, m *archive.Manifest, c *archive.Chunk) error {
	t := m.Tables[c.Table]
	name := pg.Qualified(t.Schema, t.Name)
	copySQL := pg.Copy{Schema: t.Schema, Table: t.Name, Columns: t.Columns, Encoding: m.DataEncoding()}.From()
	fmt.Fprintf(s.w, "\n%s;\n", copySQL)
	s.inCopy = true
	st := ar.OpenStream(c.Stream)
	defer st.Close()
	rw := &rowWriter{w: s.w}
	if _, err := io.Copy(rw, st); err != nil {
		return fmt.Errorf("table %s (stream %d): %w", name, c.Stream, err)
	}
	if len(rw.tail) > 0 {
		return fmt.Errorf("table %s (stream %d): the data ends inside a row", name, c.Stream)
	}
	if info, ok := ar.Stream(c.Stream); ok && info.Rows != rw.rows {
		return fmt.Errorf("table %s (stream %d): %d rows read, archive holds %d", name, c.Stream, rw.rows, info.Rows)
	}
	if _, err := s.w.WriteString("\\.\n"); err != nil {
		return err
	}
	s.inCopy = false
	return nil
}

// rowWriter passes COPY text to w in whole rows only (a row ends at a
// newline; newlines inside values are escaped), keeping a row begun in one
// frame until its end arrives. Each write of rows to w starts on an empty
// buffer unless they fit in it, so the script's output is cut at a row
// boundary, whatever is written after it.
type rowWriter struct {
	w    *bufio.Writer
	tail []byte // the start of a row whose end has not arrived
	rows int64
}

func (r *rowWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(r.tail) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.tail = append(r.tail, p...)
			return n, nil
		}
		r.tail = append(r.tail, p[:i+1]...)
		if err := r.emit(r.tail); err != nil {
			return 0, err
		}
		r.tail = r.tail[:0]
		p = p[i+1:]
	}
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		if err := r.emit(p[:i+1]); err != nil {
			return 0, err
		}
		p = p[i+1:]
	}
	r.tail = append(r.tail, p...)
	return n, nil
}

// emit writes whole rows to w.
func (r *rowWriter) emit(rows []byte) error {
	r.rows += int64(bytes.Count(rows, []byte{'\n'}))
	if len(rows) > r.w.Available() && r.w.Buffered() > 0 {
		if err := r.w.Flush(); err != nil {
			return err
		}
	}
	_, err := r.w.Write(rows)
	return err
}

func writeLargeObject(w *bufio.Writer, ar archive.Source, lo *archive.LargeObject, o Options) error {
	fmt.Fprintf(w, "\nSELECT pg_catalog.lo_create(%d);\n", lo.OID)
	s := ar.OpenStream(lo.Stream)
	defer s.Close()
	buf := make([]byte, loChunk)
	var off int64
	for {
		n, err := io.ReadFull(s, buf)
		if n > 0 {
			fmt.Fprintf(w, "SELECT pg_catalog.lo_put(%d, %d, '\\x%s'::bytea);\n", lo.OID, off, hex.EncodeToString(buf[:n]))
			off += int64(n)
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return fmt.Errorf("large object %d: %w", lo.OID, err)
		}
	}
	for _, stmt := range restore.LargeObjectSQL(lo, o.NoOwner, o.NoACL) {
		fmt.Fprintf(w, "%s;\n", stmt)
	}
	return nil
}

// pgRestore appends pg_restore's SQL for one section of the schema.
func pgRestore(ctx context.Context, tools pgbin.Tools, schema string, w io.Writer, o Options, args ...string) error {
	args = append(args, o.ToolArgs...)
	if o.NoOwner {
		args = append(args, "--no-owner")
	}
	if o.NoACL {
		args = append(args, "--no-privileges")
	}
	if o.Selection != nil && o.Selection.List != "" {
		args = append(args, "--use-list="+o.Selection.List)
	}
	if tools.Major >= 18 {
		// Optimizer statistics (pg_dump 18+) are left out of the
		// script, which may be loaded into any server (older ones lack
		// pg_restore_relation_stats): ANALYZE after loading it.
		args = append(args, "--no-statistics")
	}
	cmd := pgbin.Command(ctx, tools.PgRestore(), append(append([]string{"--file=-"}, args...), schema)...)
	cmd.Stdout = w
	var stderr pg.StderrBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_restore: %s", pg.ToolError(stderr.Bytes(), err))
	}
	return nil
}
