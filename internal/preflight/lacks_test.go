package preflight

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/toc"
	"github.com/pgsprint/pgsprint/internal/verdict"
)

// TestNeeds: each statement pg_restore prints names what it needs of the
// target: a provider, a built-in collation, a compression method, an
// owner, grantees (but not PUBLIC), a policy's roles, default privileges'
// roles, a tablespace from the entry's settings; the DATABASE entry only
// with --create; nothing from a function's body.
func TestNeeds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		entry  toc.Entry
		create bool
		want   []string // kind:name
	}{
		{"extension", toc.Entry{Type: "EXTENSION", Name: "postgis", SQL: "CREATE EXTENSION IF NOT EXISTS postgis WITH SCHEMA public;"}, false,
			[]string{"extension:postgis"}},
		{"icu collation", toc.Entry{Type: "COLLATION", SQL: "CREATE COLLATION public.c (provider = icu, deterministic = false, locale = 'und-u-ks-level2');"}, false,
			[]string{"collation provider:icu"}},
		{"libc collation", toc.Entry{Type: "COLLATION", SQL: "CREATE COLLATION public.c (provider = libc, locale = 'C');"}, false, nil},
		{"builtin collation", toc.Entry{Type: "COLLATION", SQL: "CREATE COLLATION public.c (provider = builtin, locale = 'C.UTF-8');"}, false,
			[]string{"collation provider:builtin"}},
		{"column collations", toc.Entry{Type: "TABLE", SQL: `CREATE TABLE public.t (a text COLLATE pg_catalog."en-x-icu", b text COLLATE public.mine, c text COLLATE pg_catalog."default");
ALTER TABLE ONLY public.t ALTER COLUMN a SET COMPRESSION lz4;
ALTER TABLE public.t OWNER TO "App Owner";`}, false,
			[]string{"collation:en-x-icu", "collation:default", "compression method:lz4", "owner:App Owner"}},
		{"grants", toc.Entry{Type: "ACL", SQL: `REVOKE ALL ON TABLE public.t FROM PUBLIC;
GRANT SELECT,INSERT ON TABLE public.t TO reader, "Writer";
GRANT SELECT(a) ON TABLE public.t TO PUBLIC;`}, false,
			[]string{"role:reader", "role:Writer"}},
		{"default privileges", toc.Entry{Type: "DEFAULT ACL", SQL: `ALTER DEFAULT PRIVILEGES FOR ROLE boss IN SCHEMA public GRANT SELECT ON TABLES TO reader;`}, false,
			[]string{"role:boss", "role:reader"}},
		{"policy", toc.Entry{Type: "POLICY", SQL: `CREATE POLICY p ON public.t TO app, CURRENT_USER USING (true);`}, false,
			[]string{"role:app"}},
		{"function body", toc.Entry{Type: "FUNCTION", SQL: `CREATE FUNCTION public.f() RETURNS text LANGUAGE sql AS $$SELECT 'x' COLLATE pg_catalog."xx-x-icu"$$;`}, false, nil},
		{"tablespace", toc.Entry{Type: "TABLE", Settings: []string{`SET default_tablespace = "Fast";`}, SQL: "CREATE TABLE public.t (a int);"}, false,
			[]string{"tablespace:Fast"}},
		{"default tablespace", toc.Entry{Type: "TABLE", Settings: []string{`SET default_tablespace = '';`}, SQL: "CREATE TABLE public.t (a int);"}, false, nil},
		{"database without --create", toc.Entry{Type: "DATABASE", SQL: "CREATE DATABASE d WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = icu LOCALE = 'en_US.UTF-8' ICU_LOCALE = 'und';"}, false, nil},
		{"database with --create", toc.Entry{Type: "DATABASE", SQL: "CREATE DATABASE d WITH TEMPLATE = template0 ENCODING = 'UTF8' LOCALE_PROVIDER = icu LOCALE = 'en_US.UTF-8' ICU_LOCALE = 'und';"}, true,
			[]string{"collation provider:icu"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, n := range needs([]toc.Entry{tc.entry}, tc.create) {
				got = append(got, n.kind+":"+n.name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("needs %q, want %q", got, tc.want)
			}
		})
	}
}

// lackEntries is a small archive: an extension with a table that depends
// on it and an index on that table, an ICU collation and a table using
// it, a table owned by a role and one in a tablespace, a grant to a role.
var lackEntries = []toc.Entry{
	{ID: 1, Type: "EXTENSION", Name: "pgcrypto", SQL: "CREATE EXTENSION IF NOT EXISTS pgcrypto WITH SCHEMA public;"},
	{ID: 2, Type: "COLLATION", Schema: "public", Name: "icu_und", SQL: "CREATE COLLATION public.icu_und (provider = icu, locale = 'und');"},
	{ID: 3, Type: "TABLE", Schema: "app", Name: "hashed", Deps: []int{1}, SQL: "CREATE TABLE app.hashed (h bytea DEFAULT public.gen_random_bytes(4));"},
	{ID: 4, Type: "TABLE", Schema: "app", Name: "sorted", Deps: []int{2}, SQL: "CREATE TABLE app.sorted (n text COLLATE public.icu_und);"},
	{ID: 5, Type: "TABLE", Schema: "app", Name: "owned", SQL: "CREATE TABLE app.owned (a int);\nALTER TABLE app.owned OWNER TO kg_owner;"},
	{ID: 6, Type: "TABLE", Schema: "app", Name: "placed", Settings: []string{"SET default_tablespace = kg_space;"}, SQL: "CREATE TABLE app.placed (a int);"},
	{ID: 7, Type: "INDEX", Schema: "app", Name: "hashed_h", Deps: []int{3}, SQL: "CREATE INDEX hashed_h ON app.hashed (h);"},
	{ID: 8, Type: "ACL", Schema: "app", Name: "TABLE owned", Deps: []int{5}, SQL: "GRANT SELECT ON TABLE app.owned TO kg_reader;"},
}

// TestLacks: against a target that has none of what lackEntries need,
// every line fails without --keep-going, naming what is lacked and what
// needs it; with --keep-going every line is a warning that names what
// would be skipped (dependents, directly or not) or created without its
// owner or tablespace; against a target that has all of it, every line
// passes. A database that --create cannot create fails either way.
func TestLacks(t *testing.T) {
	t.Parallel()
	none := &Has{User: "dev"}
	all := &Has{User: "dev",
		Extensions: map[string]bool{"pgcrypto": true}, Providers: map[string]bool{"icu": true},
		Roles: map[string]bool{"kg_owner": true, "kg_reader": true}, Owns: map[string]bool{"kg_owner": true},
		Tablespaces: map[string]bool{"kg_space": true}}
	notMember := &Has{User: "dev", Extensions: all.Extensions, Providers: all.Providers, Roles: all.Roles, Tablespaces: all.Tablespaces}
	for _, tc := range []struct {
		name      string
		has       *Has
		keepGoing bool
		want      []string // one per line: its mark, then what it says
	}{
		{"stops", none, false, []string{
			`✗ target extensions: the target lacks extension "pgcrypto", needed by EXTENSION pgcrypto: the run would stop`,
			`✗ target collations: the target lacks collation provider "icu", needed by COLLATION public.icu_und: the run would stop`,
			`✗ target roles: the target lacks role "kg_reader", needed by ACL app.TABLE owned; the target lacks role "kg_owner", owner of TABLE app.owned: the run would stop`,
			`✗ target tablespaces: the target lacks tablespace "kg_space", where TABLE app.placed go: the run would stop`,
		}},
		{"keeps going", none, true, []string{
			`! target extensions: the target lacks extension "pgcrypto", needed by EXTENSION pgcrypto: --keep-going leaves them out, and skips the 3 that depend on them (TABLE app.hashed, TABLE DATA app.hashed, INDEX app.hashed_h)`,
			`! target collations: the target lacks collation provider "icu", needed by COLLATION public.icu_und: --keep-going leaves them out, and skips the 2 that depend on them (TABLE app.sorted, TABLE DATA app.sorted)`,
			`! target roles: the target lacks role "kg_reader", needed by ACL app.TABLE owned: --keep-going leaves them out; the target lacks role "kg_owner", owner of TABLE app.owned: --keep-going creates them owned by "dev"`,
			`! target tablespaces: the target lacks tablespace "kg_space", where TABLE app.placed go: --keep-going creates them in the default tablespace`,
		}},
		{"not a member", notMember, false, []string{
			`✓ target extensions`, `✓ target collations`,
			`✗ target roles: "dev" is neither a superuser nor a member of role "kg_owner", owner of TABLE app.owned (add -O/--no-owner`,
			`✓ target tablespaces`,
		}},
		{"has all", all, false, []string{
			`✓ target extensions: the target has the 1 the objects to restore need ("pgcrypto")`,
			`✓ target collations`, `✓ target roles: the target has the 2`, `✓ target tablespaces`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Checklist{}
			c.lacks(lackEntries, tc.has, false, tc.keepGoing)
			var b strings.Builder
			if err := c.Print(&b); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if len(lines) != len(tc.want)+1 {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(tc.want)+1, b.String())
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d:\n%s\nwant it to start\n%s", i, lines[i], want)
				}
			}
			if ok := !strings.HasPrefix(b.String(), "✗") && !strings.Contains(b.String(), "\n✗"); ok != c.OK() {
				t.Errorf("OK() = %v with these lines", c.OK())
			}
		})
	}
	db := []toc.Entry{{ID: 1, Type: "DATABASE", Name: "d", SQL: "CREATE DATABASE d WITH TEMPLATE = template0 LOCALE_PROVIDER = icu ICU_LOCALE = 'und';"}}
	c := &Checklist{}
	c.lacks(db, none, true, true)
	if c.OK() || !strings.Contains(verdict.Failed(c.Items).Error(), "--create cannot create the database") {
		t.Errorf("an ICU database with --create into a target without ICU: %v", verdict.Failed(c.Items))
	}
}

// TestReadHas reads a real target: plpgsql is available, the connecting
// role exists and may own, pg_default is a tablespace, pglz compresses,
// and ICU, when the probe finds it, has collations (the probe leaves no
// collation behind).
func TestReadHas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t, pgtest.Options{})
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	h, err := ReadHas(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	user := conn.Config().User
	if !h.Extensions["plpgsql"] || !h.Roles[user] || !h.Owns[user] || !h.Tablespaces["pg_default"] || !h.Compressions["pglz"] || !h.Collations["C"] {
		t.Errorf("ReadHas: %+v", h)
	}
	var icu, left bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_collation WHERE collprovider = 'i'), EXISTS (SELECT FROM pg_collation WHERE collname = 'pgsprint_icu_probe')").Scan(&icu, &left); err != nil {
		t.Fatal(err)
	}
	if h.Providers["icu"] && !icu || left {
		t.Errorf("ICU: probe says %v, pg_collation %v; probe left behind: %v", h.Providers["icu"], icu, left)
	}
}
