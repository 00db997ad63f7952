package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/sqlscript"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

// ScriptOptions configure the script of a whole-server archive.
type ScriptOptions struct {
	sqlscript.Options      // for every database's part
	NoTablespaces     bool // leave tablespaces out of the globals and the databases
}

// WriteScript writes a whole-server archive as one psql script, as
// pg_dumpall's: the globals as pg_dumpall --globals-only wrote them (run
// without ON_ERROR_STOP, as pg_dumpall's are, so that a role the target
// already has is an error psql reports and passes), then for each database
// its CREATE DATABASE and properties (pg_restore --create's; postgres,
// which every server has, is connected to instead) and its own
// all-or-nothing part (restore --to-sql's: ON_ERROR_STOP, one transaction
// committed only if that database's streams were read and checked).
func WriteScript(ctx context.Context, src archive.Source, out io.Writer, o ScriptOptions) error {
	m := src.Manifest()
	if !m.IsCluster() {
		return fmt.Errorf("the archive holds one database (%q), not a whole server: write its script without --all", m.Database)
	}
	fmt.Fprintf(out, "--\n-- pgsprint %s whole-server script: the globals, then each database,\n-- each in a transaction committed only if pgsprint read and checked it. Load it with psql into an empty server.\n--\n\n", m.ToolVersion)
	if m.Globals != nil {
		script, err := readAll(src, m.Globals.Stream)
		if err != nil {
			return fmt.Errorf("read globals: %w", err)
		}
		if o.NoTablespaces {
			if script, err = withoutTablespaces(script); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(out, script+"\n"); err != nil {
			return err
		}
	}
	if o.NoTablespaces {
		o.ToolArgs = append(o.ToolArgs, "--no-tablespaces")
	}
	for _, d := range m.Databases {
		view, err := archive.OpenDatabase(src, d.Name)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n--\n-- Database %s\n--\n\n", pg.Ident(d.Name))
		if d.Name == "postgres" {
			fmt.Fprintf(out, "\\connect postgres\n\n")
		} else if err := createDatabase(ctx, view, out, o); err != nil {
			return fmt.Errorf("database %s: %w", pg.Ident(d.Name), err)
		}
		if err := sqlscript.Write(ctx, view, out, o.Options); err != nil {
			return fmt.Errorf("database %s: %w", pg.Ident(d.Name), err)
		}
	}
	return nil
}

// databaseEntry matches the lines of pg_restore --list --create that are
// the database's own entries: its DATABASE, DATABASE PROPERTIES (settings),
// and the COMMENT, ACL and SECURITY LABEL on it.
var databaseEntry = regexp.MustCompile(`^\d+; \d+ \d+ (DATABASE|DATABASE PROPERTIES|(COMMENT|ACL|SECURITY LABEL) - DATABASE) `)

// createDatabase writes what pg_restore --create writes before a
// database's objects: CREATE DATABASE with its encoding and locale, its
// owner, privileges, comment and settings, and the \connect to it.
func createDatabase(ctx context.Context, src archive.Source, out io.Writer, o ScriptOptions) error {
	tools, schema, cleanup, err := restore.SchemaFile(ctx, src)
	if err != nil {
		return err
	}
	defer cleanup()
	// The database's own entries, which pg_restore lists with --create only.
	toc, err := pgbin.Command(ctx, tools.PgRestore(), "--list", "--create", schema).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --list: %w", pg.ToolFailure(err))
	}
	var keep bytes.Buffer
	for _, line := range strings.Split(string(toc), "\n") {
		if databaseEntry.MatchString(line) {
			keep.WriteString(line + "\n")
		}
	}
	list, err := tempfile.Create("", tempfile.List)
	if err != nil {
		return fmt.Errorf("write a list: %w", err)
	}
	defer os.Remove(list.Name())
	_, err = list.Write(keep.Bytes())
	if cerr := list.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write a list: %w", err)
	}
	args := append([]string{"--create", "--use-list=" + list.Name(), "--file=-"}, o.ToolArgs...)
	if o.NoOwner {
		args = append(args, "--no-owner")
	}
	if o.NoACL {
		args = append(args, "--no-privileges")
	}
	cmd := pgbin.Command(ctx, tools.PgRestore(), append(args, schema)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_restore --create: %s", pg.ToolError(stderr.Bytes(), err))
	}
	_, err = out.Write(stdout.Bytes())
	return err
}

// withoutTablespaces leaves the tablespace statements out of a globals
// script (its comments and meta-commands go too).
func withoutTablespaces(script string) (string, error) {
	stmts, err := parseGlobals(script)
	if err != nil {
		return "", fmt.Errorf("read globals: %w", err)
	}
	var b bytes.Buffer
	for _, g := range stmts {
		if g.tablespace == "" {
			b.WriteString(g.sql + ";\n")
		}
	}
	return b.String(), nil
}
