package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/toc"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// Has is what a target server offers of the things an archive's objects
// may need (needs): read once from its catalogs, so that the comparison
// (Checklist.lacks) is a plain function of the two.
type Has struct {
	Extensions   map[string]bool // pg_available_extensions
	Providers    map[string]bool // collation providers besides libc: icu (built with it), builtin (17 and later)
	Collations   map[string]bool // pg_catalog's collations usable in the target database's encoding
	Compressions map[string]bool // the values default_toast_compression takes (pglz; lz4 when built with it)
	Roles        map[string]bool // every role
	// Owns are the roles the restoring role may give objects to: all of
	// them for a superuser, else those it is a member of (ALTER ... OWNER
	// TO asks that).
	Owns        map[string]bool
	Tablespaces map[string]bool
	User        string // the restoring role, which owns what it cannot give
}

// ReadHas reads what conn's server and database offer.
func ReadHas(ctx context.Context, conn *pgx.Conn) (*Has, error) {
	h := &Has{User: conn.Config().User}
	set := func(what, sql string) (map[string]bool, error) {
		rows, err := conn.Query(ctx, sql)
		if err != nil {
			return nil, fmt.Errorf("read the target's %s: %w", what, err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, fmt.Errorf("read the target's %s: %w", what, err)
		}
		m := make(map[string]bool, len(names))
		for _, n := range names {
			m[n] = true
		}
		return m, nil
	}
	var err error
	for _, q := range []struct {
		what string
		into *map[string]bool
		sql  string
	}{
		{"extensions", &h.Extensions, `SELECT name::text FROM pg_catalog.pg_available_extensions`},
		{"collation providers", &h.Providers, `SELECT 'builtin' WHERE pg_catalog.current_setting('server_version_num')::int >= 170000`},
		{"collations", &h.Collations, `SELECT collname::text FROM pg_catalog.pg_collation
			WHERE collnamespace = 'pg_catalog'::regnamespace
			AND collencoding IN (-1, (SELECT encoding FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()))`},
		{"compression methods", &h.Compressions, `SELECT pg_catalog.unnest(enumvals) FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression'`},
		{"roles", &h.Roles, `SELECT rolname::text FROM pg_catalog.pg_roles`},
		{"roles", &h.Owns, `SELECT rolname::text FROM pg_catalog.pg_roles
			WHERE (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) OR pg_catalog.pg_has_role(oid, 'MEMBER')`},
		{"tablespaces", &h.Tablespaces, `SELECT spcname::text FROM pg_catalog.pg_tablespace`},
	} {
		if *q.into, err = set(q.what, q.sql); err != nil {
			return nil, err
		}
	}
	icu, err := hasICU(ctx, conn)
	if err != nil {
		return nil, err
	}
	h.Providers["icu"] = icu
	return h, nil
}

// hasICU reports whether the target server is built with ICU, by creating
// an ICU collation in a transaction rolled back at once: a server built
// without it says so (feature not supported) on any database, whatever
// pg_collation holds. Where the restoring role may not create a temporary
// collation, the ICU collations initdb imports tell.
func hasICU(ctx context.Context, conn *pgx.Conn) (bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("probe the target for ICU: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	_, err = tx.Exec(ctx, `CREATE COLLATION pg_temp.pgsprint_icu_probe (provider = icu, locale = 'und')`)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &pgErr) && pgErr.Code == "0A000":
		return false, nil
	}
	if err := tx.Rollback(ctx); err != nil {
		return false, fmt.Errorf("probe the target for ICU: %w", err)
	}
	var icu bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_catalog.pg_collation WHERE collprovider = 'i')`).Scan(&icu); err != nil {
		return false, fmt.Errorf("read the target's collations: %w", err)
	}
	return icu, nil
}

// has reports whether the target offers n: whether n's name is in the
// set of its kind (a kind without a set is never lacked).
func (h *Has) has(n need) bool {
	set, ok := map[string]map[string]bool{
		needExtension:   h.Extensions,
		needProvider:    h.Providers,
		needCollation:   h.Collations,
		needCompression: h.Compressions,
		needRole:        h.Roles,
		needOwner:       h.Owns,
		needTablespace:  h.Tablespaces,
	}[n.kind]
	return !ok || set[n.name]
}

// targetLacks adds the lines of what the target lacks of what the
// archive's entries (read by contents) need (Checklist.lacks).
func (c *Checklist) targetLacks(ctx context.Context, conn *pgx.Conn, contents func(context.Context) ([]toc.Entry, error), create, keepGoing bool) {
	entries, err := contents(ctx)
	if err != nil {
		c.add(verdict.Fail("archive contents", err))
		return
	}
	h, err := ReadHas(ctx, conn)
	if err != nil {
		c.add(verdict.Fail("target lacks", err))
		return
	}
	c.lacks(entries, h, create, keepGoing)
}

// lackGroups are the checklist's lines of what a target may lack, in
// order, each with the kinds of need it covers.
var lackGroups = []struct {
	item  string
	kinds []string
}{
	{"target extensions", []string{needExtension}},
	{"target collations", []string{needProvider, needCollation}},
	{"target compression", []string{needCompression}},
	{"target roles", []string{needRole, needOwner}},
	{"target tablespaces", []string{needTablespace}},
}

// lacks adds one line for each kind of thing the archive's entries need
// of the target (extensions, collations and their providers, TOAST
// compression, roles, tablespaces): ✓ when the target has all of them;
// else what it lacks, the objects that need each, and what a restore
// would do: stop at the first (✗), or with --keep-going (!) leave them
// and what depends on them out (an owner or a tablespace: create them
// without it), name them at its end, and exit 1. A database that --create
// could not create stops even a --keep-going restore (✗).
func (c *Checklist) lacks(entries []toc.Entry, h *Has, create, keepGoing bool) {
	all := needs(entries, create)
	byID := make(map[int]*toc.Entry, len(entries))
	users := map[int][]int{}
	for i := range entries {
		e := &entries[i]
		byID[e.ID] = e
		for _, d := range e.Deps {
			users[d] = append(users[d], e.ID)
		}
	}
	for _, g := range lackGroups {
		var wanted, lacking []string
		var whys []string
		fatal := false
		for _, kind := range g.kinds {
			entriesOf := map[string][]int{}
			var order []string
			for _, n := range all {
				if n.kind != kind {
					continue
				}
				if _, ok := entriesOf[n.name]; !ok {
					order = append(order, n.name)
				}
				if ids := entriesOf[n.name]; len(ids) == 0 || ids[len(ids)-1] != n.entry {
					entriesOf[n.name] = append(ids, n.entry)
				}
			}
			for _, name := range order {
				n := need{kind: kind, name: name}
				wanted = append(wanted, name)
				if h.has(n) {
					continue
				}
				lacking = append(lacking, name)
				ids := entriesOf[name]
				for _, id := range ids {
					fatal = fatal || byID[id].Type == "DATABASE"
				}
				whys = append(whys, lackDetail(n, ids, entries, byID, users, h, keepGoing))
			}
		}
		switch {
		case len(wanted) == 0:
		case len(lacking) == 0:
			c.add(verdict.Pass(g.item, fmt.Sprintf("the target has the %d the objects to restore need (%s)", len(wanted), names(unique(wanted)))))
		case keepGoing && !fatal:
			c.add(verdict.Warn(g.item, strings.Join(whys, "; ")+"; the run names each at its end and exits 1, and --resume, once the target has what it lacks, finishes them"))
		case fatal:
			c.add(verdict.Fail(g.item, fmt.Errorf("%s: --create cannot create the database without it, --keep-going or not", strings.Join(whys, "; "))))
		default:
			c.add(verdict.Fail(g.item, fmt.Errorf("%s: the run would stop at the first; give the target what it lacks, or add --keep-going to leave these out", strings.Join(whys, "; "))))
		}
	}
}

// lackDetail says what lacking n does to the entries ids that need it:
// they are created without it (an owner, a tablespace), or they fail and
// --keep-going skips what depends on them, directly or not, named in the
// archive's order (entries).
func lackDetail(n need, ids []int, entries []toc.Entry, byID map[int]*toc.Entry, users map[int][]int, h *Has, keepGoing bool) string {
	var objs []string
	for _, id := range ids {
		if n.partial() {
			objs = append(objs, objectsOf(byID[id])[0]) // its rows are restored
		} else {
			objs = append(objs, objectsOf(byID[id])...)
		}
	}
	switch {
	case n.partial():
		var s string
		switch {
		case n.kind == needTablespace:
			s = fmt.Sprintf("the target lacks tablespace %s, where %s go", pg.Ident(n.name), list(objs))
		case !h.Roles[n.name]:
			s = fmt.Sprintf("the target lacks role %s, owner of %s", pg.Ident(n.name), list(objs))
		default:
			s = fmt.Sprintf("%s is neither a superuser nor a member of role %s, owner of %s (add -O/--no-owner, or run as a role that is)", pg.Ident(h.User), pg.Ident(n.name), list(objs))
		}
		switch {
		case !keepGoing:
		case n.kind == needTablespace:
			s += ": --keep-going creates them in the default tablespace"
		default:
			s += ": --keep-going creates them owned by " + pg.Ident(h.User)
		}
		return s
	}
	seen := map[int]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	stack := slices.Clone(ids)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range users[id] {
			if !seen[u] {
				seen[u] = true
				stack = append(stack, u)
			}
		}
	}
	var skipped []string
	for _, e := range entries {
		if seen[e.ID] && !slices.Contains(ids, e.ID) {
			skipped = append(skipped, objectsOf(&e)...)
		}
	}
	s := fmt.Sprintf("the target lacks %s %s, needed by %s", n.kind, pg.Ident(n.name), list(objs))
	switch {
	case !keepGoing:
	case len(skipped) == 0:
		s += ": --keep-going leaves them out"
	default:
		s += fmt.Sprintf(": --keep-going leaves them out, and skips the %d that depend on them (%s)", len(skipped), list(skipped))
	}
	return s
}

// objectsOf names what an entry restores as the end of a --keep-going
// run names it: its type and name, and a table's rows.
func objectsOf(e *toc.Entry) []string {
	name := e.Type + " " + e.Name
	if e.Schema != "" && e.Schema != "-" {
		name = e.Type + " " + e.Schema + "." + e.Name
	}
	if e.Type == "TABLE" {
		return []string{name, "TABLE DATA " + e.Schema + "." + e.Name}
	}
	return []string{name}
}

// list names up to eight objects, and how many more.
func list(objs []string) string {
	const most = 8
	if len(objs) <= most {
		return strings.Join(objs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(objs[:most], ", "), len(objs)-most)
}

// unique is names without repeats, in their first order.
func unique(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
