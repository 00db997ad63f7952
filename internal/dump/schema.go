package dump

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// dumpSchema streams `pg_dump --schema-only -Fc` in the shared snapshot into
// the schema stream. pg_dump is the authority on DDL for every object kind.
func dumpSchema(ctx context.Context, src *pgx.ConnConfig, snapID string, tools pgbin.Tools, s *archive.StreamWriter, blockSize int, selection []string) error {
	dsn, env := pg.ChildConn(src)
	args := append([]string{"--schema-only", "--format=custom", "--no-password",
		"--snapshot=" + snapID, "--dbname=" + dsn}, selection...)
	cmd := exec.CommandContext(ctx, tools.PgDump(), args...)
	cmd.Env = append(os.Environ(), env...)
	bw := archive.NewBlockWriter(s, blockSize)
	var stderr bytes.Buffer
	cmd.Stdout = bw
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_dump --schema-only: %s", pg.ToolError(stderr.Bytes(), err))
	}
	if err := bw.Close(); err != nil {
		return fmt.Errorf("write schema: %w", err)
	}
	return nil
}
