// Package server copies a whole PostgreSQL server: its globals (roles,
// memberships, role settings, tablespaces, as pg_dumpall --globals-only
// writes them) and every database, each through the one-database dump
// and restore pipelines (internal/dump, internal/restore), in one archive
// (format version 4: docs/FORMAT.md) whose workers are shared across
// databases.
package server

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
)

// database is one database of the source server.
type database struct {
	name      string
	allowConn bool
	template  bool
	size      int64
}

// listDatabases lists the server's databases, in name order.
func listDatabases(ctx context.Context, conn *pgx.Conn) ([]database, error) {
	rows, err := conn.Query(ctx, `SELECT datname, datallowconn, datistemplate,
		CASE WHEN pg_catalog.has_database_privilege(oid, 'CONNECT') THEN pg_catalog.pg_database_size(oid) ELSE 0 END
		FROM pg_catalog.pg_database ORDER BY datname COLLATE "C"`)
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	defer rows.Close()
	var out []database
	for rows.Next() {
		var d database
		if err := rows.Scan(&d.name, &d.allowConn, &d.template, &d.size); err != nil {
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

func matchAny(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}
