package restore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// createVia is the database pg_restore --create connects to for creating
// the archived one, and what removes it afterwards.
//
// pg_restore runs CREATE DATABASE (and its owner, ALTER DATABASE ...
// OWNER TO) in the database it first connects to, in the archive's
// client_encoding, UTF8. Names there are shared-catalog bytes that pg_dump
// read through the archived database, converted from that database's
// encoding: "dbé" owned by "rôle" (UTF8 bytes, created from a UTF8
// database) read in a LATIN1 database as "dbÃ©" and "rÃ´le". Sent to a
// UTF8 database they stay so: the wrong database name, a role that does not
// exist. Sent to a database of the archived one's encoding, the server
// converts them back into the very bytes pg_dump read. So when the
// encodings differ, pg_restore creates through a scratch database of the
// archived one's encoding (C locale, which every encoding accepts), made
// for this and dropped after it: every name byte for byte, as the server
// stores it.
func (p *preData) createVia(ctx context.Context) (*pgx.ConnConfig, func(), error) {
	none := func() {}
	want := p.m.Encoding
	if want == "" || want == "SQL_ASCII" || want == "UTF8" {
		// A UTF8 database converts nothing; a SQL_ASCII archive is
		// written and read as stored.
		return p.opts.Target, none, nil
	}
	conn, err := pg.Connect(ctx, p.opts.Target)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if conn.PgConn().ParameterStatus("server_encoding") == want {
		return p.opts.Target, none, nil
	}
	h := fnv.New32a()
	h.Write([]byte(p.m.Database))
	scratch := fmt.Sprintf("pgsprint_create_%08x", h.Sum32())
	drop := func(ctx context.Context) error {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pg.Ident(scratch))
		return err
	}
	// One a killed run left is dropped first.
	if err := drop(ctx); err != nil {
		return nil, nil, fmt.Errorf("drop scratch database %s: %w", scratch, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pg.Ident(scratch)+" TEMPLATE template0 ENCODING "+pg.Literal(want)+" LC_COLLATE 'C' LC_CTYPE 'C'"); err != nil {
		return nil, nil, fmt.Errorf("create a %s database to create database %s from: %w", want, pg.Ident(p.m.Database), err)
	}
	via := p.opts.Target.Copy()
	via.Database = scratch
	return via, func() {
		ctx := context.WithoutCancel(ctx)
		c, err := pg.Connect(ctx, p.opts.Target)
		if err != nil {
			p.log.Warn("could not drop the scratch database", "database", scratch, "err", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pg.Ident(scratch)); err != nil {
			p.log.Warn("could not drop the scratch database", "database", scratch, "err", err)
		}
	}, nil
}

// createConverted creates the archived database and restores its own
// entries (the database, its properties, comment, security label and
// privileges: those pg_restore restores only with --create) as pg_restore
// --create would, but with every name as the server stores it: pg_restore
// writes their SQL, and it runs over connections whose database has the
// archived one's encoding, so that the server converts each name back into
// the bytes pg_dump read. What pg_restore runs before it reconnects to the
// new database (DROP and CREATE DATABASE, the owner) runs in via; the rest
// in created.
func (p *preData) createConverted(ctx context.Context, via, created *pgx.ConnConfig) error {
	listed, err := p.schema.list(ctx, "--create", "--section=pre-data")
	if err != nil {
		return err
	}
	_, entries, err := toc.ParseList(string(listed))
	if err != nil {
		return err
	}
	var ids []int
	for _, e := range entries {
		if databaseDesc(e.Desc) {
			ids = append(ids, e.ID)
		}
	}
	list, err := writeList(ids)
	if err != nil {
		return err
	}
	defer removeList(list)
	args := append([]string{"--file=-", "--create", "--use-list=" + list, cleanFlag(p.opts.Clean), p.schema.statisticsFlag()}, p.schema.ownershipFlags()...)
	var kept []string
	for _, a := range args {
		if a != "" {
			kept = append(kept, a)
		}
	}
	script, err := p.schema.pgRestoreCmd(ctx, append(kept, p.schema.file)...).Output()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pg_restore --create --file: %w", pg.ToolFailure(err))
	}
	parts, err := toc.SplitScript(string(script))
	if err != nil {
		return fmt.Errorf("read pg_restore --create's script: %w", err)
	}
	var before, after []toc.Statement
	connected := false
	for _, part := range parts {
		if connected {
			after = append(after, part.Statements...)
		} else {
			before = append(before, part.Statements...)
		}
		connected = connected || strings.HasPrefix(part.Meta, `\connect`)
	}
	if err := runEach(ctx, via, before); err != nil {
		return err
	}
	return runEach(ctx, created, after)
}

// databaseDesc reports whether a pg_restore --list entry (its Desc: type,
// schema, name, owner) is one of the database's own (databaseEntry).
func databaseDesc(desc string) bool {
	for _, prefix := range []string{"DATABASE ", "COMMENT - DATABASE ", "ACL - DATABASE ", "SECURITY LABEL - DATABASE "} {
		if strings.HasPrefix(desc, prefix) {
			return true
		}
	}
	return false
}

// runEach runs statements one at a time on a connection to cfg, as psql
// would (CREATE and DROP DATABASE cannot run in the implicit transaction
// of a multi-statement query).
func runEach(ctx context.Context, cfg *pgx.ConnConfig, stmts []toc.Statement) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s.Text); err != nil {
			return fmt.Errorf("%s: %w", pg.Shorten(s.Text, 100), err)
		}
	}
	return nil
}
