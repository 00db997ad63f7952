// Package sqlscript writes an archive as one plain SQL script that psql
// loads with no pgsprint installed: the escape hatch for when pgsprint is
// not available where the data must go. pg_restore writes the schema;
// table data becomes COPY ... FROM stdin blocks, as in pg_dump's plain
// format.
package sqlscript

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// Options configure the script.
type Options struct {
	NoOwner bool // leave out ownership, as pg_restore --no-owner
	NoACL   bool // leave out privileges, as pg_restore --no-privileges
	// Selection, when set, writes only that part of the archive (restore
	// -n/-t/--schema-only/--data-only with --to-sql).
	Selection *restore.Selection
}

// loChunk is how many bytes of a large object go in one lo_put call.
const loChunk = 256 << 10

// Write writes the archive ar as a SQL script to out: pre-data, every
// table's rows, sequence values, large objects, post-data, then refreshes
// of the populated materialized views.
func Write(ctx context.Context, ar archive.Source, out io.Writer, o Options) error {
	m := ar.Manifest()
	if o.Selection != nil {
		m = o.Selection.Manifest
	}
	tools, err := pgbin.Find(ctx, majorOf(m.PgDumpVersion))
	if err != nil {
		return err
	}
	schema, err := archive.ExtractSchema(ar)
	if err != nil {
		return err
	}
	defer os.Remove(schema)
	w := bufio.NewWriterSize(out, 1<<20)
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
		if err := writeChunk(w, ar, m, &m.Chunks[i]); err != nil {
			return err
		}
	}
	for _, s := range m.Sequences {
		name := pg.Qualified(s.Schema, s.Name)
		fmt.Fprintf(w, "SELECT pg_catalog.setval(%s, %d, %t);\n", pg.Literal(name), s.LastValue, s.IsCalled)
	}
	for i := range m.LargeObjects {
		if err := writeLargeObject(w, ar, &m.LargeObjects[i], o); err != nil {
			return err
		}
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
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write SQL script: %w", err)
	}
	return nil
}

func writeChunk(w *bufio.Writer, ar archive.Source, m *archive.Manifest, c *archive.Chunk) error {
	t := m.Tables[c.Table]
	copySQL := restore.CopyInSQL(t)
	if opt := restore.EncodingOption(m.DataEncoding()); opt != "" {
		copySQL += " WITH (" + opt + ")"
	}
	fmt.Fprintf(w, "\n%s;\n", copySQL)
	s := ar.OpenStream(c.Stream)
	defer s.Close()
	if _, err := io.Copy(w, s); err != nil {
		return fmt.Errorf("table %s (stream %d): %w", pg.Qualified(t.Schema, t.Name), c.Stream, err)
	}
	_, err := w.WriteString("\\.\n")
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
	if o.NoOwner {
		args = append(args, "--no-owner")
	}
	if o.NoACL {
		args = append(args, "--no-privileges")
	}
	if o.Selection != nil && o.Selection.List != "" {
		args = append(args, "--use-list="+o.Selection.List)
	}
	cmd := exec.CommandContext(ctx, tools.PgRestore(), append(append([]string{"--file=-"}, args...), schema)...)
	cmd.Stdout = w
	var stderr limitedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_restore: %s", pg.ToolError(stderr.b, err))
	}
	return nil
}

// limitedBuffer keeps the first 64 KiB of a tool's stderr for its message.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 64<<10 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func majorOf(version string) int {
	var major int
	fmt.Sscanf(version, "%d", &major)
	return major
}
