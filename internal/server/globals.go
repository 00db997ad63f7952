package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// readGlobals runs pg_dumpall --globals-only against the server cfg
// connects to: roles, their settings and memberships, tablespaces. When
// the user cannot read pg_authid (a managed service's admin, a
// non-superuser), roles come without passwords (noPasswords), as with
// pg_dumpall --no-role-passwords.
func readGlobals(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig, tools pgbin.Tools) (script []byte, noPasswords bool, err error) {
	var readable bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT')").Scan(&readable); err != nil {
		return nil, false, fmt.Errorf("check access to pg_authid: %w", err)
	}
	dsn, env := pg.ChildConn(cfg)
	args := []string{"--globals-only", "--no-password", "--dbname=" + dsn}
	if !readable {
		args = append(args, "--no-role-passwords")
	}
	cmd := pgbin.Command(ctx, tools.PgDumpall(), args...)
	cmd.Env = append(os.Environ(), env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, fmt.Errorf("pg_dumpall --globals-only: %s", pg.ToolError(stderr.Bytes(), err))
	}
	return out.Bytes(), !readable, nil
}

// globalStmt is one statement of the globals script and what it is about.
type globalStmt struct {
	sql        string
	role       string // CREATE/ALTER/COMMENT ON/SECURITY LABEL ON ROLE: that role
	createRole bool
	tablespace string // a statement about this tablespace
	create     *tablespaceDef
	privilege  bool // GRANT/REVOKE on a tablespace
}

// tablespaceDef is pg_dumpall's CREATE TABLESPACE name OWNER o LOCATION 'l'.
type tablespaceDef struct {
	name, owner, location string
}

// parseGlobals classifies the statements of a globals script.
func parseGlobals(script string) ([]globalStmt, error) {
	var out []globalStmt
	for _, s := range splitStatements(script) {
		g := globalStmt{sql: s}
		ts := tokens(s, 12)
		switch {
		case words(ts, "create", "role") && len(ts) > 2:
			g.role, g.createRole = ts[2].text, true
		case (words(ts, "alter", "role") || words(ts, "alter", "user")) && len(ts) > 2:
			g.role = ts[2].text
		case words(ts, "comment", "on", "role") && len(ts) > 3:
			g.role = ts[3].text
		case words(ts, "create", "tablespace"):
			def, err := parseTablespace(ts)
			if err != nil {
				return nil, fmt.Errorf("%w: %.80s", err, s)
			}
			g.tablespace, g.create = def.name, def
		case words(ts, "alter", "tablespace") && len(ts) > 2:
			g.tablespace = ts[2].text
		case words(ts, "comment", "on", "tablespace") && len(ts) > 3:
			g.tablespace = ts[3].text
		case words(ts, "security", "label"):
			for i := 2; i+2 < len(ts); i++ {
				if words(ts[i:], "on", "role") {
					g.role = ts[i+2].text
				} else if words(ts[i:], "on", "tablespace") {
					g.tablespace = ts[i+2].text
				}
			}
		case words(ts, "grant") || words(ts, "revoke"):
			for i := 1; i+2 < len(ts); i++ {
				if words(ts[i:], "on", "tablespace") {
					g.tablespace, g.privilege = ts[i+2].text, true
					break
				}
			}
		}
		out = append(out, g)
	}
	return out, nil
}

// parseTablespace reads CREATE TABLESPACE name [OWNER role] LOCATION 'dir'.
func parseTablespace(ts []token) (*tablespaceDef, error) {
	if len(ts) < 5 {
		return nil, errors.New("cannot read CREATE TABLESPACE")
	}
	def := &tablespaceDef{name: ts[2].text}
	for i := 3; i+1 < len(ts); i++ {
		switch {
		case words(ts[i:], "owner"):
			def.owner = ts[i+1].text
			i++
		case words(ts[i:], "location") && ts[i+1].literal:
			def.location = ts[i+1].text
			return def, nil
		}
	}
	return nil, errors.New("cannot read CREATE TABLESPACE's location")
}

// GlobalsOptions say how globals are restored.
type GlobalsOptions struct {
	NoTablespaces bool // leave tablespaces out: everything goes to the default one
	NoOwner       bool // tablespaces are owned by the restoring user
	NoACL         bool // no GRANT/REVOKE on tablespaces
	// Journal runs in the globals' transaction, after them: a restore
	// records there that the globals are in.
	Journal func(ctx context.Context, tx pgx.Tx) error
}

// GlobalsReport says what restoring the globals did.
type GlobalsReport struct {
	Roles     int      // roles created
	KeptRoles []string // roles the target had: kept as they are
	// DifferentRoles says, for kept roles whose attributes differ from
	// the archive's, how (e.g. `alice: LOGIN in the archive, NOLOGIN on
	// the target`): they are not changed.
	DifferentRoles  []string
	Tablespaces     int      // tablespaces created
	KeptTablespaces []string // tablespaces the target had (their location is theirs)
}

// applyGlobals restores a globals script on conn: tablespaces are created
// first (CREATE TABLESPACE cannot run in a transaction), then everything
// else in one transaction, so that an interrupted restore leaves every role
// either absent or complete. A role the target already has is kept as it
// is: its attributes, password, settings and comment are not changed (its
// memberships are granted).
func applyGlobals(ctx context.Context, conn *pgx.Conn, script string, opts GlobalsOptions) (*GlobalsReport, error) {
	stmts, err := parseGlobals(script)
	if err != nil {
		return nil, fmt.Errorf("read globals: %w", err)
	}
	roles, err := names(ctx, conn, "SELECT rolname FROM pg_catalog.pg_roles")
	if err != nil {
		return nil, fmt.Errorf("list the target's roles: %w", err)
	}
	spaces, err := names(ctx, conn, "SELECT spcname FROM pg_catalog.pg_tablespace")
	if err != nil {
		return nil, fmt.Errorf("list the target's tablespaces: %w", err)
	}
	rep := &GlobalsReport{}
	if !opts.NoTablespaces {
		for _, g := range stmts {
			if g.create == nil {
				continue
			}
			if spaces[g.create.name] {
				rep.KeptTablespaces = append(rep.KeptTablespaces, g.create.name)
				continue
			}
			if _, err := conn.Exec(ctx, "CREATE TABLESPACE "+pg.Ident(g.create.name)+" LOCATION "+pg.Literal(g.create.location)); err != nil {
				return nil, explainTablespace(g.create, err)
			}
			rep.Tablespaces++
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	kept := map[string]bool{}
	for _, g := range stmts {
		sql := g.sql
		switch {
		case g.role != "" && roles[g.role]:
			if g.createRole && !kept[g.role] {
				kept[g.role] = true
				rep.KeptRoles = append(rep.KeptRoles, g.role)
			}
			if diff, err := roleDiff(ctx, tx, g); err != nil {
				return nil, err
			} else if diff != "" {
				rep.DifferentRoles = append(rep.DifferentRoles, diff)
			}
			continue
		case g.tablespace != "" && opts.NoTablespaces, g.privilege && opts.NoACL:
			continue
		case g.create != nil:
			if opts.NoOwner || g.create.owner == "" {
				continue
			}
			sql = "ALTER TABLESPACE " + pg.Ident(g.create.name) + " OWNER TO " + pg.Ident(g.create.owner)
		case g.createRole:
			rep.Roles++
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("restore globals: %.100s: %w", redact(oneLine(sql)), err)
		}
	}
	if opts.Journal != nil {
		if err := opts.Journal(ctx, tx); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("restore globals: %w", err)
	}
	return rep, nil
}

// explainTablespace turns the server's refusal of a tablespace's directory
// into what to do about it.
func explainTablespace(def *tablespaceDef, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "58P01" || pgErr.Code == "42501" || pgErr.Code == "55000" || pgErr.Code == "55006") {
		return fmt.Errorf("tablespace %s: its directory %s cannot be used on the target server (%s): create it there, empty and owned by the server's operating-system user, or restore with --no-tablespaces",
			pg.Ident(def.name), def.location, pgErr.Message)
	}
	return fmt.Errorf("create tablespace %s: %w", pg.Ident(def.name), err)
}

// names runs a query of one text column into a set.
func names(ctx context.Context, conn *pgx.Conn, sql string) (map[string]bool, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	set := make(map[string]bool, len(list))
	for _, n := range list {
		set[n] = true
	}
	return set, nil
}

// redact cuts a statement before its PASSWORD clause, for a message:
// never print a password, even hashed.
func redact(s string) string {
	if i := strings.Index(strings.ToUpper(s), " PASSWORD "); i >= 0 {
		return s[:i] + " PASSWORD ..."
	}
	return s
}

// oneLine folds a statement onto one line for a message.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// GlobalsObjects names the roles and tablespaces a globals script creates,
// for list.
func GlobalsObjects(script string) (roles, tablespaces []string, err error) {
	stmts, err := parseGlobals(script)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range stmts {
		switch {
		case g.createRole:
			roles = append(roles, g.role)
		case g.create != nil:
			tablespaces = append(tablespaces, g.create.name)
		}
	}
	return roles, tablespaces, nil
}

// roleAttributes are the attributes ALTER ROLE ... WITH sets, as
// pg_dumpall writes them, and the pg_roles column of each.
var roleAttributes = []struct{ word, column string }{
	{"superuser", "rolsuper"}, {"inherit", "rolinherit"}, {"createrole", "rolcreaterole"}, {"createdb", "rolcreatedb"},
	{"login", "rolcanlogin"}, {"replication", "rolreplication"}, {"bypassrls", "rolbypassrls"},
}

// roleDiff compares the attributes an ALTER ROLE ... WITH of a role the
// target already has would set with the target's, and says how they
// differ ("" if they do not, or g sets none).
func roleDiff(ctx context.Context, tx pgx.Tx, g globalStmt) (string, error) {
	ts := tokens(g.sql, 64)
	if !words(ts, "alter", "role") || len(ts) < 4 || !words(ts[3:], "with") {
		return "", nil
	}
	want := map[string]bool{}
	for _, t := range ts[4:] {
		if t.quoted || t.literal {
			continue
		}
		for _, a := range roleAttributes {
			switch t.text {
			case a.word:
				want[a.word] = true
			case "no" + a.word:
				want[a.word] = false
			}
		}
	}
	var diffs []string
	for _, a := range roleAttributes {
		w, ok := want[a.word]
		if !ok {
			continue
		}
		var have bool
		if err := tx.QueryRow(ctx, "SELECT "+a.column+" FROM pg_catalog.pg_roles WHERE rolname = $1", g.role).Scan(&have); err != nil {
			return "", fmt.Errorf("read role %s: %w", pg.Ident(g.role), err)
		}
		if have != w {
			word := func(b bool) string {
				if b {
					return strings.ToUpper(a.word)
				}
				return "NO" + strings.ToUpper(a.word)
			}
			diffs = append(diffs, fmt.Sprintf("%s in the archive, %s on the target", word(w), word(have)))
		}
	}
	if len(diffs) == 0 {
		return "", nil
	}
	return g.role + ": " + strings.Join(diffs, ", "), nil
}
