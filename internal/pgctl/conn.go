package pgctl

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// ConnString returns a libpq keyword/value connection string that reaches
// database db over the unix socket as the superuser. Values are quoted per
// libpq rules, so hostile database names are safe.
func (c *Instance) ConnString(db string) string {
	return KeywordConnString(map[string]string{
		"host":   c.sockDir,
		"port":   strconv.Itoa(c.port),
		"user":   SuperuserName,
		"dbname": db,
	})
}

// TCPConnString returns a connection string that reaches database db over TCP
// as user. It holds no password: tests supply it the way the code under test
// expects (for the superuser it is SuperuserPassword). sslmode=disable saves
// the pointless TLS negotiation with a server that has no certificate.
func (c *Instance) TCPConnString(db, user string) string {
	return KeywordConnString(map[string]string{
		"host":    "127.0.0.1",
		"port":    strconv.Itoa(c.port),
		"user":    user,
		"dbname":  db,
		"sslmode": "disable",
	})
}

// KeywordConnString renders params as a libpq keyword/value string in a
// stable order (host, port, user, dbname first, then alphabetical), quoting
// each value when libpq requires it.
func KeywordConnString(params map[string]string) string {
	order := []string{"host", "port", "user", "dbname"}
	seen := map[string]bool{}
	var parts []string
	for _, k := range order {
		if v, ok := params[k]; ok {
			parts = append(parts, k+"="+QuoteConnValue(v))
			seen[k] = true
		}
	}
	var rest []string
	for k := range params {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, k+"="+QuoteConnValue(params[k]))
	}
	return strings.Join(parts, " ")
}

// QuoteConnValue quotes a value for a libpq keyword/value connection string:
// values that are empty or contain whitespace, quotes or backslashes are
// wrapped in single quotes with ' and \ backslash-escaped; others are left
// bare for readability.
func QuoteConnValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(v) + "'"
}

// CreateDB creates database name (any string without NUL) owned by the
// superuser, from template0 so that nothing added to template1 leaks in.
func (c *Instance) CreateDB(ctx context.Context, name string) error {
	return c.CreateDBFrom(ctx, name, "template0")
}

// CreateDBFrom creates database name as a copy of database template. On
// PostgreSQL 15 and later it copies the files (STRATEGY FILE_COPY), as
// 14 and earlier always did: 15's default writes every page of the
// template to the WAL, which costs a test server three times the CPU,
// and tests create hundreds of databases.
func (c *Instance) CreateDBFrom(ctx context.Context, name, template string) error {
	if strings.ContainsRune(name, 0) {
		return fmt.Errorf("pgctl: database name %q contains NUL", name)
	}
	sql := "CREATE DATABASE " + pg.Ident(name) + " TEMPLATE " + pg.Ident(template)
	if c.version >= 15 {
		sql += " STRATEGY FILE_COPY"
	}
	if err := c.Exec(ctx, "postgres", sql); err != nil {
		return fmt.Errorf("pgctl: creating database %q: %w", name, err)
	}
	return nil
}

// Exec runs a multi-statement SQL script in database db over the simple query
// protocol (one implicit transaction unless the script has its own
// BEGIN/COMMIT). Use ExecPsql for scripts with psql meta-commands or
// statements that cannot run inside a transaction block.
func (c *Instance) Exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, c.ConnString(db)+" client_encoding=UTF8")
	if err != nil {
		return fmt.Errorf("pgctl: connecting to %q: %w", db, err)
	}
	_, execErr := conn.PgConn().Exec(ctx, sql).ReadAll()
	closeErr := conn.Close(ctx)
	if execErr != nil {
		return fmt.Errorf("pgctl: executing in %q: %w", db, execErr)
	}
	if closeErr != nil {
		return fmt.Errorf("pgctl: closing connection to %q: %w", db, closeErr)
	}
	return nil
}

// ExecPsql feeds script to `psql -X -v ON_ERROR_STOP=1` on database db, so
// psql meta-commands work and the first error aborts with a non-nil error
// that quotes psql's message and line number.
func (c *Instance) ExecPsql(ctx context.Context, db, script string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, "psql"),
		"-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", c.ConnString(db), "-f", "-")
	cmd.Env = CleanEnv()
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgctl: psql on %q: %w\n%s", db, err, tail(out.String(), 4000))
	}
	return nil
}
