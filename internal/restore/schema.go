package restore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// schemaArchive is pg_dump's schema archive, extracted from the archive
// to a file, and the client programs that read it: every stage lists,
// prints or restores its entries through these methods, so that all of
// them agree on the flags that leave objects out.
type schemaArchive struct {
	tools pgbin.Tools
	file  string  // the pg_dump custom archive, a temp file
	opts  Options // NoOwner, NoACL, Filter's pg_restore flags
	// withStats: the schema stream was written by pg_dump 18 or later,
	// which may carry statistics, and read by a pg_restore that knows
	// them; every pg_restore run but the statistics step is told
	// --no-statistics, so none is restored before its data is in.
	withStats bool
}

// newSchemaArchive is the schema archive file of an archive whose
// manifest is m, read with tools.
func newSchemaArchive(tools pgbin.Tools, file string, m *archive.Manifest, opts Options) *schemaArchive {
	return &schemaArchive{tools: tools, file: file, opts: opts, withStats: majorOf(m.PgDumpVersion) >= 18 && tools.Major >= 18}
}

// SchemaFile is ar's schema (pg_dump's custom archive) in a private
// file (archive.ExtractSchema: a memfd for an encrypted archive), with the client programs that read it (at least as new
// as the pg_dump that wrote it): what everything that reads a schema
// without a target starts from (restore -l, --to-sql of one database or of
// a whole server). cleanup removes the file.
func SchemaFile(ctx context.Context, ar archive.Source) (tools pgbin.Tools, file string, cleanup func(), err error) {
	tools, err = pgbin.Find(ctx, majorOf(ar.Manifest().PgDumpVersion))
	if err != nil {
		return pgbin.Tools{}, "", nil, err
	}
	f, err := archive.ExtractSchema(ar)
	if err != nil {
		return pgbin.Tools{}, "", nil, err
	}
	return tools, f.Path, f.Remove, nil
}

// offlineSchema is the schema archive of ar without a target, for reading
// its table of contents (restore -l, --to-sql's selection); cleanup
// removes the file.
func offlineSchema(ctx context.Context, ar archive.Source, opts Options) (*schemaArchive, func(), error) {
	tools, file, cleanup, err := SchemaFile(ctx, ar)
	if err != nil {
		return nil, nil, err
	}
	// Offline readers never print statistics: no flag for them.
	return &schemaArchive{tools: tools, file: file, opts: opts}, cleanup, nil
}

// preDataTransactionSize is how many archive entries pg_restore 17 and
// later creates per transaction in pre-data (--transaction-size), rather
// than one transaction each: with 10,000 tables, 20,000 commits. A resumed
// restore drops and creates again whatever an interrupted pre-data left
// (preDataStage), so its transactions' size changes nothing there. Each
// entry locks a few relations (a table, its TOAST table and index) until
// the commit: 100 entries stay within a few hundred lock slots, fewer than
// pg_dump holds for a database with that many tables.
const preDataTransactionSize = 100

// pgRestore runs pg_restore on the schema archive against cfg, stopping at
// the first error: pre-data's objects. Its session runs with
// synchronous_commit off (so pre-data's many commits do not each wait for
// a WAL flush): the journal row that records pre-data as done is committed
// after it with the server's own setting, which flushes the WAL up to
// there, pg_restore's commits included; a crash before that leaves
// pre-data unrecorded, and a resumed restore drops and creates it again.
func (s *schemaArchive) pgRestore(ctx context.Context, cfg *pgx.ConnConfig, args ...string) error {
	dsn, env := pg.ChildConn(cfg)
	env = pg.WithSetting(env, "synchronous_commit", "off")
	all := []string{"--exit-on-error", "--no-password", "--dbname=" + dsn, s.statisticsFlag()}
	if s.tools.Major >= 17 {
		all = append(all, fmt.Sprintf("--transaction-size=%d", cmp.Or(s.opts.TransactionSize, preDataTransactionSize)))
	}
	all = append(all, s.ownershipFlags()...)
	all = append(all, nonEmpty(args)...)
	cmd := s.pgRestoreCmd(ctx, append(all, s.file)...)
	cmd.Env = append(os.Environ(), env...)
	return runChild(ctx, cmd, "pg_restore")
}

// nonEmpty is args without the empty ones (a flag left out: "").
func nonEmpty(args []string) []string {
	var out []string
	for _, a := range args {
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// runChild runs cmd, keeping its standard error for the message of its
// failure: an interruption is the context's error, a failure "what: "
// and the tool's own error lines.
func runChild(ctx context.Context, cmd *exec.Cmd, what string) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %s", what, pg.ToolError(stderr.Bytes(), err))
	}
	return nil
}

func (s *schemaArchive) ownershipFlags() []string {
	var f []string
	if s.opts.NoOwner {
		f = append(f, "--no-owner")
	}
	if s.opts.NoACL {
		f = append(f, "--no-privileges")
	}
	if s.opts.SessionAuthorization {
		f = append(f, "--use-set-session-authorization")
	}
	return f
}

// statisticsFlag is the flag that keeps statistics out of a pg_restore
// run other than the statistics step.
func (s *schemaArchive) statisticsFlag() string {
	if s.withStats {
		return "--no-statistics"
	}
	return ""
}

// pgRestoreAtomic restores the schema archive's entries selected by args
// into t in one transaction that also records step in t's journal.
// pg_restore cannot add a statement to its own transaction, so it writes
// its script (the same SQL it would run) and psql runs it with
// --single-transaction, stopping at the first error: an interruption at
// any point leaves none of it behind and the step unrecorded.
func (s *schemaArchive) pgRestoreAtomic(ctx context.Context, t *target, step string, args ...string) error {
	gen := append([]string{"--file=-"}, s.ownershipFlags()...)
	gen = append(gen, nonEmpty(args)...)
	script, err := s.pgRestoreCmd(ctx, append(gen, s.file)...).Output()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_restore --file: %w", pg.ToolFailure(err))
	}
	script = append(script, []byte("\n"+t.j.RecordSQL(step)+";\n")...)
	dsn, env := pg.ChildConn(t.cfg)
	cmd := s.command(ctx, s.tools.Psql(), "--no-psqlrc", "--quiet", "--no-password", "--single-transaction",
		"--set=ON_ERROR_STOP=1", "--dbname="+dsn)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(script)
	return runChild(ctx, cmd, "pg_restore (through psql)")
}

// restoreIDs restores the listed entries in the listed (pg_dump's) order
// into t, atomically with their journal step (pgRestoreAtomic).
func (s *schemaArchive) restoreIDs(ctx context.Context, t *target, step string, ids []int) error {
	list, err := writeList(ids)
	if err != nil {
		return err
	}
	defer removeList(list)
	return s.pgRestoreAtomic(ctx, t, step, "--use-list="+list)
}

// writeList writes the dump IDs as a pg_restore --use-list file, in their
// order, and returns its name; removeList removes it.
func writeList(ids []int) (string, error) {
	f, err := tempfile.Create("", tempfile.List)
	if err != nil {
		return "", fmt.Errorf("write pg_restore list: %w", err)
	}
	var b bytes.Buffer
	for _, id := range ids {
		b.WriteString(strconv.Itoa(id) + ";\n")
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write pg_restore list: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write pg_restore list: %w", err)
	}
	return f.Name(), nil
}

// removeList removes a list file of writeList.
func removeList(name string) { os.Remove(name) }

// command is exec.CommandContext for a child program that must not outlive
// pgsprint: if pgsprint is killed, a pg_restore left running would race the
// resumed restore.
// Empty arguments (a flag that does not apply) are left out.
func (s *schemaArchive) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	var kept []string
	for _, a := range args {
		if a != "" {
			kept = append(kept, a)
		}
	}
	return pgbin.Command(ctx, name, kept...)
}

// pgRestoreCmd is pg_restore with args, after the flags that leave kinds
// of objects out (--no-comments and the like), so that every listing and
// script of the schema agrees on what it holds.
func (s *schemaArchive) pgRestoreCmd(ctx context.Context, args ...string) *exec.Cmd {
	return s.command(ctx, s.tools.PgRestore(), append(s.opts.Filter.PgRestoreArgs(), args...)...)
}

// list is pg_restore --list of the whole schema archive with args, as
// pg_restore prints it without the filter's flags (restore -l, the
// statistics' choice).
func (s *schemaArchive) list(ctx context.Context, args ...string) ([]byte, error) {
	out, err := s.command(ctx, s.tools.PgRestore(), append(append([]string{"--list"}, args...), s.file)...).Output()
	if err != nil {
		return nil, fmt.Errorf("pg_restore --list: %w", pg.ToolFailure(err))
	}
	return out, nil
}

// logger is log, or one that discards.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
