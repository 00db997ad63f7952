package dump

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Schema writes `pg_dump --schema-only -Fc` of the session's snapshot to
// w. pg_dump is the authority on DDL for every object kind.
//
// The schema is written in UTF8, the encoding of the manifest's names and
// of every pgsprint connection, so that the SQL a restore runs and the
// names it adds to it agree (pg_dump's default, the server's encoding or
// PGCLIENTENCODING, would not); a SQL_ASCII source's bytes stay as stored.
func (s *Session) Schema(ctx context.Context, w io.Writer) error {
	dsn, env := pg.ChildConn(s.source)
	enc := "UTF8"
	if s.Manifest != nil && s.Manifest.Encoding == "SQL_ASCII" {
		enc = "SQL_ASCII"
	}
	args := append(s.schemaArgs(), "--format=custom", "--no-password", "--encoding="+enc,
		"--snapshot="+s.snap.ID, "--dbname="+dsn)
	args = append(args, s.filter.PgDumpArgs()...)
	cmd := exec.CommandContext(ctx, s.tools.PgDump(), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stdout = w
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_dump --schema-only: %s", pg.ToolError(stderr.Bytes(), err))
	}
	return nil
}

// schemaArgs selects what pg_dump writes: the schema, and with pg_dump 18
// or later the optimizer statistics too (STATISTICS DATA entries: tables'
// in the data section, indexes' in post-data), which pg_dump leaves out of
// --schema-only; --no-data --statistics is the schema plus statistics,
// without table data, sequence values or large objects, which pgsprint
// carries itself. A --schema-only or --data-only dump carries none, as
// pg_dump's.
func (s *Session) schemaArgs() []string {
	if s.tools.Major < 18 || s.noStat || s.filter.SchemaOnly || s.filter.DataOnly {
		return []string{"--schema-only"}
	}
	return []string{"--no-data", "--statistics"}
}

// dumpSchema streams the session's schema into the archive's schema stream.
func dumpSchema(ctx context.Context, sess *Session, s *archive.StreamWriter, blockSize int) error {
	bw := archive.NewBlockWriter(s, blockSize)
	if err := sess.Schema(ctx, bw); err != nil {
		return err
	}
	if err := bw.Close(); err != nil {
		return fmt.Errorf("write schema: %w", err)
	}
	return nil
}
