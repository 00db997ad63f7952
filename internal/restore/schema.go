package restore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// preDataTransactionSize is how many archive entries pg_restore 17 and
// later creates per transaction in pre-data (--transaction-size), rather
// than one transaction each: with 10,000 tables, 20,000 commits. A resumed
// restore drops and creates again whatever an interrupted pre-data left
// (preData), so its transactions' size changes nothing there. Each entry
// locks a few relations (a table, its TOAST table and index) until the
// commit: 100 entries stay within a few hundred lock slots, fewer than
// pg_dump holds for a database with that many tables.
const preDataTransactionSize = 100

// pgRestore runs pg_restore on the schema archive against cfg, stopping at
// the first error. Its session runs with synchronous_commit off (so
// pre-data's many commits do not each wait for a WAL flush): the journal
// row that records pre-data as done is committed after it with the
// server's own setting, which flushes the WAL up to there, pg_restore's
// commits included; a crash before that leaves pre-data unrecorded, and a
// resumed restore drops and creates it again.
func (r *run) pgRestore(ctx context.Context, cfg *pgx.ConnConfig, args ...string) error {
	dsn, env := pg.ChildConn(cfg)
	env = pg.WithSetting(env, "synchronous_commit", "off")
	all := []string{"--exit-on-error", "--no-password", "--dbname=" + dsn, r.statisticsFlag()}
	if r.tools.Major >= 17 {
		all = append(all, fmt.Sprintf("--transaction-size=%d", preDataTransactionSize))
	}
	all = append(all, r.ownershipFlags()...)
	for _, a := range args {
		if a != "" {
			all = append(all, a)
		}
	}
	all = append(all, r.schema)
	cmd := r.pgRestoreCmd(ctx, all...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_restore: %s", pg.ToolError(stderr.Bytes(), err))
	}
	return nil
}

func (r *run) ownershipFlags() []string {
	var f []string
	if r.opts.NoOwner {
		f = append(f, "--no-owner")
	}
	if r.opts.NoACL {
		f = append(f, "--no-privileges")
	}
	return f
}

// postData creates indexes, constraints, triggers and the rest of post-data
// when its table of contents could not be taken apart: in one transaction
// with its journal step, so on one connection (this is the fallback path,
// and correctness after an interruption comes first).
func (r *run) postData(ctx context.Context) error {
	if r.j.isDone("post-data") {
		return nil
	}
	return r.pgRestoreAtomic(ctx, "post-data", "--section=post-data", r.sel.useList(), r.statisticsFlag())
}

// pgRestoreAtomic restores the schema archive's entries selected by args
// in one transaction that also records step in the journal. pg_restore
// cannot add a statement to its own transaction, so it writes its script
// (the same SQL it would run) and psql runs it with --single-transaction,
// stopping at the first error: an interruption at any point leaves none of
// it behind and the step unrecorded.
func (r *run) pgRestoreAtomic(ctx context.Context, step string, args ...string) error {
	gen := append([]string{"--file=-"}, r.ownershipFlags()...)
	for _, a := range args {
		if a != "" {
			gen = append(gen, a)
		}
	}
	script, err := r.pgRestoreCmd(ctx, append(gen, r.schema)...).Output()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_restore --file: %w", err)
	}
	script = append(script, []byte("\n"+r.j.recordSQL(step)+";\n")...)
	dsn, env := pg.ChildConn(r.target)
	cmd := r.command(ctx, r.tools.Psql(), "--no-psqlrc", "--quiet", "--no-password", "--single-transaction",
		"--set=ON_ERROR_STOP=1", "--dbname="+dsn)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_restore (through psql): %s", pg.ToolError(stderr.Bytes(), err))
	}
	return nil
}

// command is exec.CommandContext for a child program that must not outlive
// pgsprint: if pgsprint is killed, a pg_restore left running would race the
// resumed restore.
// Empty arguments (a flag that does not apply) are left out.
func (r *run) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	var kept []string
	for _, a := range args {
		if a != "" {
			kept = append(kept, a)
		}
	}
	cmd := exec.CommandContext(ctx, name, kept...)
	dieWithParent(cmd)
	return cmd
}

// pgRestoreCmd is pg_restore with args, after the flags that leave kinds
// of objects out (--no-comments and the like), so that every listing and
// script of the schema agrees on what it holds.
func (r *run) pgRestoreCmd(ctx context.Context, args ...string) *exec.Cmd {
	return r.command(ctx, r.tools.PgRestore(), append(r.opts.Filter.PgRestoreArgs(), args...)...)
}

// dropArchivedObjects runs the DROP ... IF EXISTS statements pg_restore
// --clean would issue for every object in the archive, in its reverse
// dependency order, and nothing else. pg_restore cannot drop without also
// creating, so its script is cut before the first object it creates.
//
// Like pg_restore --clean, a failing DROP does not stop the others: some
// fail harmlessly (a partition's inherited constraint goes with its
// parent's). Whatever really remains makes the strict pre-data step fail
// with "already exists", which names the object.
func (r *run) dropArchivedObjects(ctx context.Context) error {
	args := []string{"--clean", "--if-exists", "--file=-"}
	if l := r.sel.useList(); l != "" {
		args = append(args, l)
	}
	out, err := r.pgRestoreCmd(ctx, append(args, r.schema)...).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --clean: %w", err)
	}
	if i := bytes.Index(out, []byte("\n--\n-- Name: ")); i >= 0 {
		out = out[:i+1]
	}
	dsn, env := pg.ChildConn(r.target)
	args = []string{"--no-psqlrc", "--quiet", "--no-password", "--dbname=" + dsn}
	partial := r.sel.list != ""
	if partial {
		// Dropping part of a database the user goes on using is all or
		// nothing: a table that cannot go (a view of another depends on
		// it) must not lose its sequence or default on the way.
		args = append(args, "--single-transaction", "--set=ON_ERROR_STOP=1")
	}
	cmd := r.command(ctx, r.tools.Psql(), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	switch {
	case err != nil && partial && ctx.Err() == nil:
		return fmt.Errorf("--clean could not drop the selected objects (target database %q is unchanged): %s", r.target.Database, firstError(stderr.String()))
	case err != nil:
		return fmt.Errorf("drop existing objects: %s", pg.ToolError(stderr.Bytes(), err))
	case stderr.Len() > 0:
		r.log.Debug("some drops failed; pre-data will report what remains", "psql", stderr.String())
	}
	return nil
}

// firstError is the first ERROR of psql's complaints, with its DETAIL
// (which names the objects in the way), on one line.
func firstError(stderr string) string {
	var msg string
	for _, l := range strings.Split(stderr, "\n") {
		switch i, j := strings.Index(l, "ERROR:"), strings.Index(l, "DETAIL:"); {
		case msg == "" && i >= 0:
			msg = strings.TrimSpace(l[i+len("ERROR:"):])
		case msg != "" && j >= 0:
			return msg + " (" + strings.TrimSpace(l[j+len("DETAIL:"):]) + ")"
		case msg != "" && (i >= 0 || strings.HasPrefix(l, "psql:")):
			return msg
		}
	}
	return msg
}
