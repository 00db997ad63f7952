// Package cluster copies a whole PostgreSQL server: its globals (roles,
// memberships, role settings, tablespaces, as pg_dumpall --globals-only
// writes them) and every database, each through the one-database dump
// and restore pipelines (internal/dump, internal/restore), in one archive
// (format version 4: docs/FORMAT.md) whose workers are shared across
// databases.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// source is the source server of a whole-server dump or clone, as both
// begin: a connection to the database the others are listed from, its
// version, the pg_dump it is read with, its lock table shared by the databases' pg_dumps, and the databases
// read and skipped.
type source struct {
	conn    *pgx.Conn
	srv     pg.Server
	tools   pgbin.Tools
	locks   *dump.LockBudget
	dbs     []database
	skipped []archive.SkippedDatabase
}

// openSource connects to the source server through cfg and lists its
// databases, leaving out those matching exclude (chooseDatabases), with
// pg_dump chosen by programs. The caller closes it.
func openSource(ctx context.Context, cfg *pgx.ConnConfig, exclude []string, programs *pgbin.Finder) (*source, error) {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &source{conn: conn}
	if err := s.read(ctx, exclude, programs); err != nil {
		s.close(ctx)
		return nil, err
	}
	return s, nil
}

func (s *source) read(ctx context.Context, exclude []string, programs *pgbin.Finder) error {
	var err error
	if s.srv, err = pg.ReadServer(ctx, s.conn); err != nil {
		return err
	}
	if s.tools, err = programs.Find(ctx, s.srv.Major()); err != nil {
		return err
	}
	if s.locks, err = dump.NewLockBudget(ctx, s.conn); err != nil {
		return err
	}
	all, err := listDatabases(ctx, s.conn)
	if err != nil {
		return err
	}
	s.dbs, s.skipped, err = chooseDatabases(all, exclude)
	return err
}

// close closes the connection.
func (s *source) close(ctx context.Context) { s.conn.Close(context.WithoutCancel(ctx)) }

// database is one database of the source server.
type database struct {
	name      string
	allowConn bool
	template  bool
	size      int64
	owner     string
}

// listDatabases lists the server's databases, in name order.
func listDatabases(ctx context.Context, conn *pgx.Conn) ([]database, error) {
	rows, err := conn.Query(ctx, `SELECT datname, datallowconn, datistemplate,
		-- pg_database_size is NULL for a database dropped meanwhile
		coalesce(CASE WHEN pg_catalog.has_database_privilege(oid, 'CONNECT') THEN pg_catalog.pg_database_size(oid) END, 0),
		pg_catalog.pg_get_userbyid(datdba)
		FROM pg_catalog.pg_database ORDER BY datname COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	defer rows.Close()
	var out []database
	for rows.Next() {
		var d database
		if err := rows.Scan(&d.name, &d.allowConn, &d.template, &d.size, &d.owner); err != nil {
			return nil, fmt.Errorf("list databases: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// chooseDatabases splits the server's databases into those a whole-server
// dump reads and those it skips, with the reason: templates, databases
// that do not allow connections (as pg_dumpall), and those matching an
// --exclude-database pattern (pg_dump's pattern language, as pg_dumpall).
func chooseDatabases(all []database, exclude []string) (keep []database, skipped []archive.SkippedDatabase, err error) {
	var res []*regexp.Regexp
	for _, p := range exclude {
		pat, err := filter.ParseSchema(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--exclude-database %s: %w", p, err)
		}
		re, err := regexp.Compile("(?s)" + pat.Schema)
		if err != nil {
			return nil, nil, fmt.Errorf("--exclude-database %s: %w", p, err)
		}
		res = append(res, re)
	}
	for _, d := range all {
		switch {
		case d.template:
			skipped = append(skipped, archive.SkippedDatabase{Name: d.name, Reason: "template"})
		case !d.allowConn:
			skipped = append(skipped, archive.SkippedDatabase{Name: d.name, Reason: "does not allow connections"})
		case matchAny(res, d.name):
			skipped = append(skipped, archive.SkippedDatabase{Name: d.name, Reason: "--exclude-database"})
		default:
			keep = append(keep, d)
		}
	}
	return keep, skipped, nil
}

// ErrNoDatabase is wrapped by the error of a whole-server dump or clone
// whose selection leaves no database to read (noDatabase): a usage error,
// found before anything is read or written.
var ErrNoDatabase = errors.New("no database to copy")

// noDatabase is the error of a whole-server run that has no database
// left to read: the server (not the database it connected to) and why
// each one was skipped, so that the --exclude-database that took them
// all is seen.
func noDatabase(verb string, src *pgx.ConnConfig, skipped []archive.SkippedDatabase) error {
	var reasons []string
	var order []string
	names := map[string][]string{}
	for _, d := range skipped {
		if names[d.Reason] == nil {
			order = append(order, d.Reason)
		}
		names[d.Reason] = append(names[d.Reason], pg.Ident(d.Name))
	}
	next := ""
	for _, r := range order {
		label := r
		if r == "--exclude-database" {
			label, next = "excluded by --exclude-database", ": loosen --exclude-database"
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s", label, strings.Join(names[r], ", ")))
	}
	return noDatabaseError{fmt.Errorf("no database to %s on the server at %s:%d: every one is skipped (%s)%s", verb, src.Host, src.Port, strings.Join(reasons, "; "), next)}
}

// noDatabaseError is noDatabase's error: its own words, and ErrNoDatabase.
type noDatabaseError struct{ error }

// Is makes errors.Is(err, ErrNoDatabase) hold.
func (e noDatabaseError) Is(target error) bool { return target == ErrNoDatabase }

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// Databases lists, through conn (connected as src says), the databases a
// whole-server dump or clone (verb) would read and those it would skip,
// with the reason: what preflight checks. A selection that leaves none
// is refused as the run refuses it (ErrNoDatabase).
func Databases(ctx context.Context, conn *pgx.Conn, src *pgx.ConnConfig, verb string, exclude []string) ([]string, []archive.SkippedDatabase, error) {
	all, err := listDatabases(ctx, conn)
	if err != nil {
		return nil, nil, err
	}
	keep, skipped, err := chooseDatabases(all, exclude)
	if err != nil {
		return nil, nil, err
	}
	if len(keep) == 0 {
		return nil, skipped, noDatabase(verb, src, skipped)
	}
	names := make([]string, len(keep))
	for i, d := range keep {
		names[i] = d.name
	}
	return names, skipped, nil
}
