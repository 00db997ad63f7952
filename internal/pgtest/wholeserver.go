package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// ServerDatabases are the databases LoadServer creates that a whole-server
// dump carries (postgres is every server's).
var ServerDatabases = []string{"app", "lat", "postgres"}

// LoadServer gives a cluster what a whole-server copy must carry: roles
// with passwords, a membership WITH ADMIN OPTION, role and role-in-database
// settings, a database owned by a non-superuser with its own settings,
// comment and default privileges, a LATIN1 database with a C locale, a
// tablespace in ts holding a table and an index, objects owned by several
// roles, a table big enough to be dumped in chunks, and two databases a
// dump leaves out (one refusing connections, one for --exclude-database).
func LoadServer(t testing.TB, c *Instance, ts string) {
	t.Helper()
	ctx := context.Background()
	// One statement at a time: CREATE DATABASE and CREATE TABLESPACE
	// cannot run in the transaction of a multi-statement query (no
	// statement here has a ";" inside it).
	exec := func(db, sql string) {
		t.Helper()
		for _, stmt := range strings.Split(sql, ";") {
			if err := c.Exec(ctx, db, stmt); err != nil {
				t.Fatalf("%s: %s: %v", db, stmt, err)
			}
		}
	}
	exec("postgres", `CREATE ROLE alice LOGIN PASSWORD 'alice-pw' CREATEDB;
		CREATE ROLE bob LOGIN PASSWORD 'bob-pw' CONNECTION LIMIT 5;
		CREATE ROLE readers NOLOGIN;
		GRANT readers TO alice WITH ADMIN OPTION;
		GRANT readers TO bob;
		ALTER ROLE alice SET work_mem = '8MB';
		COMMENT ON ROLE alice IS 'owns app';
		CREATE TABLESPACE space1 OWNER alice LOCATION `+pg.Literal(ts)+`;
		GRANT CREATE ON TABLESPACE space1 TO bob;
		CREATE DATABASE app OWNER alice;
		CREATE DATABASE lat TEMPLATE template0 ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C';
		CREATE DATABASE noconn;
		ALTER DATABASE noconn ALLOW_CONNECTIONS false;
		CREATE DATABASE skipme;
		ALTER DATABASE app SET statement_timeout = '5s';
		ALTER ROLE bob IN DATABASE app SET search_path = 'app, public';
		COMMENT ON DATABASE app IS 'the application';
		GRANT CONNECT ON DATABASE app TO readers;
		CREATE TABLE pg_notes (id int PRIMARY KEY, note text);
		INSERT INTO pg_notes VALUES (1, 'in postgres')`)
	exec("app", `SET ROLE alice;
		CREATE SCHEMA app;
		ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO readers;
		CREATE TABLE app.orders (id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2));
		INSERT INTO app.orders SELECT g, 'customer ' || g, g * 1.25 FROM generate_series(1, 20000) g;
		CREATE TABLE app.archived (id int, payload text) TABLESPACE space1;
		CREATE INDEX archived_id ON app.archived (id) TABLESPACE space1;
		INSERT INTO app.archived SELECT g, md5(g::text) FROM generate_series(1, 500) g;
		RESET ROLE;
		CREATE TABLE public.bobs (id serial PRIMARY KEY, v text);
		ALTER TABLE public.bobs OWNER TO bob;
		INSERT INTO public.bobs (v) VALUES ('one'), ('two')`)
	exec("lat", `CREATE TABLE words (w text); INSERT INTO words VALUES ('café'), ('naïve')`)
	exec("skipme", `CREATE TABLE gone (x int); GRANT SELECT ON gone TO bob`)
}

// WithoutRole leaves role's ALTER ROLE ... WITH line out of a globals dump.
func WithoutRole(globals, role string) string {
	var keep []string
	for _, l := range strings.Split(globals, "\n") {
		if !strings.HasPrefix(l, "ALTER ROLE "+role+" WITH ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
