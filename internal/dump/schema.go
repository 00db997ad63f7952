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

// schemaLockWait is pg_dump's --lock-wait-timeout. pg_dump locks the
// tables the leader holds already, beside the readers: a lock it cannot
// take at once is behind another session's request for ACCESS EXCLUSIVE,
// which waits for the leader, so waiting longer would be waiting forever.
// (pg_dump applies it as statement_timeout to its LOCK TABLE statements,
// hence not zero.)
const schemaLockWait = "2s"

// Schema writes `pg_dump --schema-only -Fc` of the session's snapshot to
// w. pg_dump is the authority on DDL for every object kind.
func (s *Session) Schema(ctx context.Context, w io.Writer) error {
	dsn, env := pg.ChildConn(s.source)
	args := append([]string{"--schema-only", "--format=custom", "--no-password", "--lock-wait-timeout=" + schemaLockWait,
		"--snapshot=" + s.snap.ID, "--dbname=" + dsn}, s.filter.PgDumpArgs()...)
	cmd := exec.CommandContext(ctx, s.tools.PgDump(), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stdout = w
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if bytes.Contains(stderr.Bytes(), []byte("LOCK TABLE")) {
			// The server is unchanged: the leader still holds its locks,
			// so whoever was in pg_dump's way still waits.
			if conflict := pg.Blocked(ctx, s.leader, s.locked); conflict.Blocker != nil {
				return conflict
			}
		}
		return fmt.Errorf("pg_dump --schema-only: %s", pg.ToolError(stderr.Bytes(), err))
	}
	return nil
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
