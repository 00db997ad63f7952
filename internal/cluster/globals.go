package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// readGlobals runs pg_dumpall --globals-only against the server cfg
// connects to: roles, their settings and memberships, tablespaces. When
// the user cannot read pg_authid (a managed service's admin, a
// non-superuser), or when withoutPasswords asks for it (--no-role-passwords),
// roles come without passwords (noPasswords), as with pg_dumpall
// --no-role-passwords.
func readGlobals(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig, tools pgbin.Tools, withoutPasswords bool) (script []byte, noPasswords bool, err error) {
	var readable bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT')").Scan(&readable); err != nil {
		return nil, false, fmt.Errorf("check access to pg_authid: %w", err)
	}
	dsn, env := pg.ChildConn(cfg)
	args := []string{"--globals-only", "--no-password", "--dbname=" + dsn}
	if !readable || withoutPasswords {
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
	return out.Bytes(), !readable || withoutPasswords, nil
}

// globalStmt is one statement of the globals script and what it is about.
type globalStmt struct {
	sql        string
	toks       []token // sql's tokens (tokensOf)
	err        error   // what could not be read of it
	role       string  // CREATE/ALTER/COMMENT ON/SECURITY LABEL ON ROLE: that role
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
	parts, err := toc.SplitScript(script)
	if err != nil {
		return nil, fmt.Errorf("read globals: %w", err)
	}
	var out []globalStmt
	for _, p := range parts {
		for _, st := range p.Statements {
			g := classify(st)
			if g.err != nil {
				return nil, g.err
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// classify says what a statement of the globals is about.
func classify(st toc.Statement) globalStmt {
	ts := tokensOf(st)
	g := globalStmt{sql: strings.TrimSuffix(st.Text, ";"), toks: ts}
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
			g.err = fmt.Errorf("%w: %s", err, pg.Shorten(st.Text, 80))
			break
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
	return g
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
	// Settings are the restore's: with NoOwner tablespaces are owned by
	// the restoring user, with NoACL they get no GRANT/REVOKE.
	restore.Settings
	// Journal runs in the globals' transaction, after them: a restore
	// records there that the globals are in.
	Journal func(ctx context.Context, tx pgx.Tx) error
}

// GlobalsReport says what restoring the globals did.
type GlobalsReport struct {
	Roles     int      // roles created
	KeptRoles []string // roles the target had: kept as they are
	// DifferentRoles says, for each kept role that differs from the
	// archive's, how, attribute by attribute, settings, comment and
	// password included (e.g. `alice: LOGIN in the archive, NOLOGIN on
	// the target, setting work_mem = 8MB in the archive not applied`):
	// none of it is changed. A password is never printed.
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
	diffs := map[string][]string{} // kept role: how the archive's differs
	for _, g := range stmts {
		sql := g.sql
		switch {
		case g.role == journal.ClusterRole:
			// The journal of a whole-server restore that was running on
			// the source (or was killed there) is not the source's: it
			// would stand in the way of this run's own.
			continue
		case g.role != "" && roles[g.role]:
			if g.createRole && !kept[g.role] {
				kept[g.role] = true
				rep.KeptRoles = append(rep.KeptRoles, g.role)
			}
			d, err := keptDiff(ctx, tx, g)
			if err != nil {
				return nil, err
			}
			diffs[g.role] = append(diffs[g.role], d...)
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
			return nil, fmt.Errorf("restore globals: %s: %w", pg.Shorten(redact(oneLine(sql)), 100), err)
		}
	}
	for _, r := range rep.KeptRoles {
		if len(diffs[r]) > 0 {
			rep.DifferentRoles = append(rep.DifferentRoles, r+": "+strings.Join(diffs[r], ", "))
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
	list, err := pg.QueryStrings(ctx, conn, sql)
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

// keptDiff says how g, a statement of the archive about a role the target
// already has (and keeps as it is), differs from that role: each attribute
// ALTER ROLE ... WITH sets (CONNECTION LIMIT, VALID UNTIL and the password
// included, the password never printed), each ALTER ROLE ... SET, the
// comment. Nothing when they agree, or g is another statement (CREATE
// ROLE; memberships are granted).
func keptDiff(ctx context.Context, tx pgx.Tx, g globalStmt) ([]string, error) {
	ts := g.toks
	switch {
	case words(ts, "alter", "role") && len(ts) > 3 && words(ts[3:], "with"):
		return attributeDiff(ctx, tx, g.role, ts[4:])
	case words(ts, "alter", "role") && len(ts) > 3 && words(ts[3:], "set"):
		return settingDiff(ctx, tx, g.role, ts[4:])
	case words(ts, "comment", "on", "role") && len(ts) > 5 && words(ts[4:], "is"):
		var same bool
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.shobj_description(oid, 'pg_authid') IS NOT DISTINCT FROM $2
			FROM pg_catalog.pg_roles WHERE rolname = $1`, g.role, commentOf(ts[5])).Scan(&same); err != nil {
			return nil, fmt.Errorf("read role %s: %w", pg.Ident(g.role), err)
		}
		if !same {
			return []string{"its comment in the archive not applied"}, nil
		}
	}
	return nil, nil
}

// commentOf is COMMENT ... IS's value: nil for NULL.
func commentOf(t token) any {
	if !t.literal && t.text == "null" {
		return nil
	}
	return t.text
}

// attributeDiff compares the attributes of ALTER ROLE ... WITH (ts, the
// words after WITH) with the target's role.
func attributeDiff(ctx context.Context, tx pgx.Tx, role string, ts []token) ([]string, error) {
	var have struct {
		flags      map[string]bool
		connLimit  int
		validUntil *string
	}
	have.flags = map[string]bool{}
	var b [7]bool
	if err := tx.QueryRow(ctx, `SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls,
		rolconnlimit, rolvaliduntil::text FROM pg_catalog.pg_roles WHERE rolname = $1`, role).
		Scan(&b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &have.connLimit, &have.validUntil); err != nil {
		return nil, fmt.Errorf("read role %s: %w", pg.Ident(role), err)
	}
	for i, a := range roleAttributes {
		have.flags[a.word] = b[i]
	}
	upper := func(a string, on bool) string {
		if on {
			return strings.ToUpper(a)
		}
		return "NO" + strings.ToUpper(a)
	}
	var diffs []string
	for i := 0; i < len(ts); i++ {
		t := ts[i]
		if t.quoted || t.literal {
			continue
		}
		for _, a := range roleAttributes {
			if t.text != a.word && t.text != "no"+a.word {
				continue
			}
			if want := t.text == a.word; want != have.flags[a.word] {
				diffs = append(diffs, fmt.Sprintf("%s in the archive, %s on the target", upper(a.word, want), upper(a.word, have.flags[a.word])))
			}
		}
		switch {
		case words(ts[i:], "connection", "limit") && i+2 < len(ts):
			want := ts[i+2].text
			if i+3 < len(ts) && want == "-" {
				want += ts[i+3].text
			}
			if want != strconv.Itoa(have.connLimit) {
				diffs = append(diffs, fmt.Sprintf("CONNECTION LIMIT %s in the archive, %d on the target", want, have.connLimit))
			}
		case words(ts[i:], "valid", "until") && i+2 < len(ts) && ts[i+2].literal:
			var same bool
			if err := tx.QueryRow(ctx, "SELECT $1::timestamptz IS NOT DISTINCT FROM $2::timestamptz", ts[i+2].text, have.validUntil).Scan(&same); err != nil {
				return nil, fmt.Errorf("role %s: VALID UNTIL %s: %w", pg.Ident(role), ts[i+2].text, err)
			}
			if !same {
				target := "none"
				if have.validUntil != nil {
					target = *have.validUntil
				}
				diffs = append(diffs, fmt.Sprintf("VALID UNTIL %s in the archive, %s on the target", ts[i+2].text, target))
			}
		case words(ts[i:], "password") && i+1 < len(ts):
			d, err := passwordDiff(ctx, tx, role, ts[i+1])
			if err != nil {
				return nil, err
			}
			if d != "" {
				diffs = append(diffs, d)
			}
		}
	}
	return diffs, nil
}

// passwordDiff compares the archive's password of role (a literal, or
// NULL) with the target's, without ever saying what either is. A target
// whose pg_authid this user cannot read is said so.
func passwordDiff(ctx context.Context, tx pgx.Tx, role string, want token) (string, error) {
	var readable bool
	if err := tx.QueryRow(ctx, "SELECT pg_catalog.has_table_privilege('pg_catalog.pg_authid', 'SELECT')").Scan(&readable); err != nil {
		return "", fmt.Errorf("read role %s: %w", pg.Ident(role), err)
	}
	if !readable {
		return "password in the archive not applied (the target's cannot be read to compare)", nil
	}
	var have *string
	if err := tx.QueryRow(ctx, "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = $1", role).Scan(&have); err != nil {
		return "", fmt.Errorf("read role %s: %w", pg.Ident(role), err)
	}
	switch {
	case !want.literal && want.text == "null":
		if have != nil {
			return "no password in the archive, one on the target", nil
		}
	case have == nil:
		return "password in the archive not applied (none on the target)", nil
	case *have != want.text:
		return "password in the archive not applied (the target's differs)", nil
	}
	return "", nil
}

// settingDiff compares ALTER ROLE ... SET name TO value (ts, the words
// after SET) with the role's own settings on the target (those of no
// database in particular): pg_db_role_setting holds it as "name=value",
// a list's items joined by ", ".
func settingDiff(ctx context.Context, tx pgx.Tx, role string, ts []token) ([]string, error) {
	if len(ts) < 3 || (ts[1].text != "to" && ts[1].text != "=") {
		return nil, nil
	}
	var vals []string
	for _, t := range ts[2:] {
		if t.text == "," && !t.literal && !t.quoted {
			continue
		}
		vals = append(vals, t.text)
	}
	want := ts[0].text + "=" + strings.Join(vals, ", ")
	var same bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_db_role_setting s JOIN pg_catalog.pg_roles r ON r.oid = s.setrole
		WHERE r.rolname = $1 AND s.setdatabase = 0 AND $2 = ANY (s.setconfig))`, role, want).Scan(&same); err != nil {
		return nil, fmt.Errorf("read the settings of role %s: %w", pg.Ident(role), err)
	}
	if same {
		return nil, nil
	}
	return []string{fmt.Sprintf("setting %s = %s in the archive not applied", ts[0].text, strings.Join(vals, ", "))}, nil
}
