package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// TestPreflight runs preflight dump, restore and clone on the shared
// cluster: a run that would start passes with every line ✓ and exit 0;
// a target that is not empty, -j beyond max_connections and --follow on
// a server with wal_level = replica each fail with exit 1 and a ✗ line
// naming the fix; a server that cannot be reached exits 3, bad flags 2.
// None of them changes anything: the objects, the rows, the replication
// slots and publications of both databases are the same before and
// after, and no file is written.
func TestPreflight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := shared(t)
	for _, db := range []string{"src", "dst", "full"} {
		if err := s.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{"src", "full"} {
		if err := s.Exec(ctx, db, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g;
			CREATE SEQUENCE s; SELECT nextval('s'); SELECT lo_from_bytea(0, 'lo');`); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "src.pgs")
	mustPgsprint(t, "dump", "-q", "-d", s.ConnString("src"), "-f", archive)

	state := func() string {
		var b strings.Builder
		for _, db := range []string{"src", "dst", "full"} {
			fmt.Fprintf(&b, "%s: %v\n", db, pgtest.UserObjects(t, s.ConnString(db)))
		}
		for _, db := range []string{"src", "full"} {
			fmt.Fprintf(&b, "%s rows: %s\n", db, pgtest.Scalar(t, s.ConnString(db), `SELECT count(*) || ':' || sum(hashtext(v)) || ':' || (SELECT last_value FROM s) FROM t`))
		}
		fmt.Fprintf(&b, "slots, publications: %s\n", pgtest.Scalar(t, s.ConnString("src"),
			`SELECT (SELECT count(*) FROM pg_replication_slots) || ',' || (SELECT count(*) FROM pg_publication) || ',' || (SELECT count(*) FROM pg_subscription)`))
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fmt.Fprintf(&b, "file %s\n", e.Name())
		}
		return b.String()
	}
	before := state()

	out := filepath.Join(dir, "new.pgs")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stdout (✓ and ✗ lines) or, for 2 and 3, stderr
	}{
		{"dump ready", []string{"dump", "-d", s.ConnString("src"), "-f", out, "-j", "2"}, exitOK,
			[]string{"✓ source: ", "no TLS", "✓ pg_dump: ", "✓ connections on the source: -j 2 needs 3", "✓ lock slots: pg_dump locks 1 tables",
				"✓ read privileges: 2 tables and sequences selected, all readable", "✓ large objects: 1, all readable", "✓ disk space in " + dir, "ready: the run would start"}},
		{"dump to stdout", []string{"dump", "-d", s.ConnString("src"), "-n", "public"}, exitOK, []string{"✓ output: standard output"}},
		{"restore ready", []string{"restore", "-f", archive, "-d", s.ConnString("dst"), "-j", "2"}, exitOK,
			[]string{"✓ archive: " + archive, "✓ target: ", "✓ pg_restore: ", "✓ connections on the target: -j 2 needs 3", fmt.Sprintf("✓ target database: %q is empty", s.Name("dst")), "✓ encoding: UTF8 into UTF8"}},
		{"clone ready", []string{"clone", "--source", s.ConnString("src"), "--target", s.ConnString("dst"), "-j", "2"}, exitOK,
			[]string{"✓ source: ", "✓ target: ", "✓ pg_dump: ", "✓ pg_restore: ", "✓ connections on the target", fmt.Sprintf("✓ target database: %q is empty", s.Name("dst"))}},
		{"restore into a database that is not empty", []string{"restore", "-f", archive, "-d", s.ConnString("full")}, exitFailure,
			[]string{fmt.Sprintf("✗ target database: target database %q is not empty: it holds ", s.Name("full")), "table public.t", "use --clean", "not ready: 1 of"}},
		{"restore --clean into it", []string{"restore", "-f", archive, "-d", s.ConnString("full"), "--clean"}, exitOK,
			[]string{"✓ target database: --clean drops"}},
		{"clone into a database that is not empty", []string{"clone", "--source", s.ConnString("src"), "--target", s.ConnString("full")}, exitFailure,
			[]string{"✗ target database: ", "is not empty", "sequence public.s"}},
		{"-j beyond max_connections", []string{"dump", "-d", s.ConnString("src"), "-f", out, "-j", "200"}, exitFailure,
			[]string{"✗ connections on the source: -j 200 needs 201 more connections", "lower -j"}},
		{"follow on wal_level replica", []string{"clone", "--source", s.ConnString("src"), "--target", s.ConnString("dst"), "--follow"}, exitFailure,
			[]string{"✗ follow: wal_level: source has wal_level = replica", "ALTER SYSTEM SET wal_level = logical", "✓ follow: replica identity: 1 tables", "✓ follow: subscription right: superuser",
				"✓ follow: source reach: ", "✓ follow: DDL capture (source): superuser: event triggers", "✓ follow: DDL replay (target): superuser"}},
		{"same database", []string{"clone", "--source", s.ConnString("src"), "--target", s.ConnString("src")}, exitUsage,
			[]string{"✗ distinct databases: --source and --target are the same database"}},
		{"archive missing", []string{"restore", "-f", filepath.Join(dir, "none.pgs"), "-d", s.ConnString("dst")}, exitFailure,
			[]string{"✗ archive: ", "none.pgs", "✓ target: "}},
		{"server unreachable", []string{"dump", "-d", "host=127.0.0.1 port=1 dbname=x connect_timeout=5", "-f", out}, exitConnection,
			[]string{"connect to "}},
		{"usage", []string{"dump", "-d", s.ConnString("src"), "-j", "0"}, exitUsage, []string{"-j must be at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, nil, append([]string{"preflight"}, tc.args...)...)
			t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d", r.code, tc.code)
			}
			text := r.stdout
			if tc.code == exitUsage || tc.code == exitConnection {
				text += r.stderr
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				switch {
				case l == "", strings.HasPrefix(l, "ready: "), strings.HasPrefix(l, "not ready: "):
				case tc.code == exitOK && !strings.HasPrefix(l, "✓ "):
					t.Errorf("a run that would start has a line that is not ✓: %s", l)
				case !strings.HasPrefix(l, "✓ ") && !strings.HasPrefix(l, "✗ ") && !strings.HasPrefix(l, "! "):
					t.Errorf("not a checklist line: %s", l)
				}
			}
		})
	}
	if after := state(); after != before {
		t.Errorf("preflight changed something:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestPreflightPrivilegesAndLocks: as a role without SELECT on a table,
// without USAGE on a schema, under another role's row-level security and
// without the right to read a large object, preflight dump lists each
// with the GRANT that fixes it; on a server whose lock table cannot hold
// pg_dump's locks, preflight names max_locks_per_transaction, and dump
// itself refuses with the same line before writing anything (one check,
// run by both). Its own cluster: it creates roles and shrinks the lock
// table.
func TestPreflightPrivilegesAndLocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t, pgtest.Options{Settings: pgtest.SmallLockTable(10)})
	for _, db := range []string{"app", "many"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, "app", `CREATE ROLE reader LOGIN;
		CREATE TABLE open (id int); GRANT SELECT ON open TO reader;
		CREATE TABLE secret (id int);
		CREATE SCHEMA hidden; CREATE TABLE hidden.h (id int); GRANT SELECT ON hidden.h TO reader;
		CREATE TABLE policed (id int); GRANT SELECT ON policed TO reader; ALTER TABLE policed ENABLE ROW LEVEL SECURITY;
		SELECT lo_from_bytea(0, 'private');`); err != nil {
		t.Fatal(err)
	}
	// 200 tables, 20 per transaction (creating a table locks it too):
	// pg_dump's 300 locks are more than twice the 140 entries.
	for i := 0; i < 200; i += 20 {
		if err := c.Exec(ctx, "many", fmt.Sprintf(`DO $$ BEGIN FOR i IN %d..%d LOOP EXECUTE format('CREATE TABLE t%%s (id int)', i); END LOOP; END $$`, i, i+19)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "x.pgs")
	r := pgsprint(t, nil, "preflight", "dump", "-d", c.ConnString("app")+" user=reader", "-f", out)
	t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != exitFailure {
		t.Errorf("exit %d, want %d", r.code, exitFailure)
	}
	for _, w := range []string{"✗ read privileges: 3 of 4 selected tables and sequences cannot be read", "no SELECT on table public.secret", "no USAGE on schema hidden",
		"row-level security on public.policed", "GRANT USAGE on the schema and SELECT on them to \"reader\"",
		"✗ large objects: 1 of 1 large objects cannot be read: GRANT SELECT ON LARGE OBJECT", "✓ lock slots: "} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	// dump itself refuses up front, with the same words, before pg_dump
	// or a reader meets "permission denied" half-way.
	r = pgsprint(t, nil, "dump", "-q", "-d", c.ConnString("app")+" user=reader", "-f", out)
	checkOneError(t, r.code, exitFailure, r.stderr, "3 of 4 selected tables and sequences cannot be read: no SELECT on table public.secret, no USAGE on schema hidden, row-level security on public.policed")
	if _, err := os.Stat(out); err == nil {
		t.Errorf("the refused dump wrote %s", out)
	}
	// Left out, they no longer stand in the way; the large object does.
	r = pgsprint(t, nil, "dump", "-q", "-d", c.ConnString("app")+" user=reader", "-f", out, "-T", "secret", "-T", "policed", "-N", "hidden")
	checkOneError(t, r.code, exitFailure, r.stderr, "1 of 1 large objects cannot be read: GRANT SELECT ON LARGE OBJECT")
	mustPgsprint(t, "dump", "-q", "-d", c.ConnString("app")+" user=reader", "-f", out, "-T", "secret", "-T", "policed", "-N", "hidden", "-B")
	const fix = "raise max_locks_per_transaction to at least"
	r = pgsprint(t, nil, "preflight", "dump", "-d", c.ConnString("many"), "-f", out)
	t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	if r.code != exitFailure || !strings.Contains(r.stdout, "✗ lock slots: pg_dump locks 200 tables") || !strings.Contains(r.stdout, fix) {
		t.Errorf("exit %d, want %d and a ✗ lock slots line with %q", r.code, exitFailure, fix)
	}
	many := filepath.Join(dir, "many.pgs")
	r = pgsprint(t, nil, "dump", "-q", "-d", c.ConnString("many"), "-f", many)
	checkOneError(t, r.code, exitFailure, r.stderr, fix)
	pgtest.NoPartialFiles(t, dir, "x.pgs")
	if _, err := os.Stat(many); err == nil {
		t.Errorf("the refused dump wrote %s", many)
	}
}

// TestPreflightS3: preflight dump -f s3://... checks credentials, the
// bucket and the right to write by starting a multipart upload and
// aborting it: it passes and leaves no object and no open upload (so a
// second preflight without --overwrite passes too); a bucket that does
// not exist fails naming it (exit 1), a wrong secret key exits 3, and
// preflight restore of a key that holds nothing names the archive.
func TestPreflightS3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := remotetest.StartS3(t)
	s := shared(t)
	if err := s.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "src", "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	bucket := srv.Bucket(t)
	env := srv.Env(srv.Endpoint)
	loc := "s3://" + bucket + "/preflight/x.pgs"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"ready", env, []string{"dump", "-d", s.ConnString("src"), "-f", loc}, exitOK,
			"✓ output: " + loc + ": credentials, bucket and the right to write (an upload started and aborted)"},
		{"again, without --overwrite", env, []string{"dump", "-d", s.ConnString("src"), "-f", loc}, exitOK, "✓ output: " + loc},
		{"no such bucket", env, []string{"dump", "-d", s.ConnString("src"), "-f", "s3://no-such-bucket-pgsprint/x.pgs"}, exitFailure,
			`✗ output: s3://no-such-bucket-pgsprint/x.pgs: bucket "no-such-bucket-pgsprint" does not exist`},
		{"wrong secret", append(env[:len(env):len(env)], "AWS_SECRET_ACCESS_KEY=wrong"), []string{"dump", "-d", s.ConnString("src"), "-f", loc}, exitConnection,
			"wrong secret access key"},
		{"restore of nothing", env, []string{"restore", "-d", s.ConnString("src"), "-f", loc}, exitFailure, "✗ archive: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, tc.env, append([]string{"preflight"}, tc.args...)...)
			t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			if r.code != tc.code || !strings.Contains(r.stdout, tc.want) {
				t.Errorf("exit %d, want %d and a line with %q", r.code, tc.code, tc.want)
			}
			if up := srv.OpenUploads(t, bucket); len(up) != 0 {
				t.Errorf("open uploads after preflight: %v", up)
			}
			if objs := srv.Objects(t, bucket); len(objs) != 0 {
				t.Errorf("objects after preflight: %v", objs)
			}
		})
	}
}

// TestPreflightAll: preflight of the whole-server runs, dump, restore and
// clone --all, and restore --database, gives one checklist whose
// per-database lines name their database: each database's lock slots and
// read privileges on the source, the databases chosen and skipped, the
// globals, the server journal, the roles and each database on the target
// (created, replaced with --clean, refused when it exists, or refused when
// the user may not create databases). Every database excluded exits 2 as
// dump --all does; a clone --all into its own source exits 2. Nothing is
// changed: the databases, roles and files are the same after. Its own
// source cluster: --all reads every database of the server, and the test
// adds roles.
func TestPreflightAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	s := shared(t)
	for _, db := range []string{"pfall_app", "pfall_big"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, db, `CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 500) g; CREATE SEQUENCE s;`); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, "postgres", `CREATE ROLE pfall_owner; CREATE ROLE pfall_weak LOGIN;`); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "pfall_app", `ALTER TABLE t OWNER TO pfall_owner; SELECT lo_from_bytea(0, 'lo');`); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDB(ctx, "pfdst"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "all.pgs")
	mustPgsprint(t, "dump", "--all", "-q", "-d", c.ConnString("postgres"), "-f", archive)
	state := func() string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, e := range entries {
			files = append(files, e.Name())
		}
		return pgtest.Scalar(t, c.ConnString("postgres"), `SELECT (SELECT string_agg(datname, ',' ORDER BY datname) FROM pg_database) || ' ' ||
			(SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles)`) + " " + fmt.Sprint(files) + " " + fmt.Sprint(pgtest.UserObjects(t, s.ConnString("pfdst")))
	}
	before := state()
	src := c.ConnString("postgres")
	out := filepath.Join(dir, "new.pgs")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"dump --all ready", []string{"dump", "--all", "-d", src, "-f", out, "-j", "2"}, exitOK,
			[]string{"✓ source: ", `✓ databases: 3: "pfall_app", "pfall_big", "postgres"; skipped: "template0" (template), "template1" (template)`, "✓ pg_dump: ", "✓ globals: roles (with their passwords)",
				"✓ connections on the source: -j 2 and 3 databases need 6", "✓ lock slots: the databases' pg_dumps take turns within the lock table's ",
				`✓ database "pfall_app": lock slots: pg_dump locks 1 tables`, `✓ database "pfall_app": read privileges: 2 tables and sequences selected, all readable`,
				`✓ database "pfall_app": large objects: 1, all readable`, `✓ database "pfall_big": read privileges: `, `✓ database "postgres": lock slots: `, "✓ disk space in " + dir, "ready: the run would start"}},
		{"dump --all of no database", []string{"dump", "--all", "-d", src, "-f", out, "--exclude-database", "*"}, exitUsage,
			[]string{"✗ databases: no database to dump on the server at ", "loosen --exclude-database"}},
		{"restore --all over the source's databases", []string{"restore", "--all", "-f", archive, "-d", src}, exitFailure,
			[]string{"✓ archive: " + archive + ": a whole server of PostgreSQL", `3 databases ("pfall_app", "pfall_big", "postgres")`, "✓ pg_restore: ", "✓ roles: ", "✓ server journal: none",
				`✗ database "pfall_app": target database: the target server already has a database "pfall_app": restore --all creates each of the source's databases; use --clean`,
				`✗ database "pfall_big": target database: the target server already has a database "pfall_big"`, `✓ database "postgres": target database: "postgres" is empty`, "not ready: 2 of"}},
		{"restore --all --clean", []string{"restore", "--all", "-f", archive, "-d", src, "--clean"}, exitOK,
			[]string{`✓ database "pfall_app": target database: "pfall_app" exists: --clean drops it and creates it again`, `✓ database "postgres": target database: --clean drops the archive's objects first`}},
		{"restore --all --clean as a role that may not create databases", []string{"restore", "--all", "-f", archive, "-d", src + " user=pfall_weak", "--clean"}, exitFailure,
			[]string{`✗ database "pfall_app": target database: role "pfall_weak" may not create databases (CREATEDB), and restore --all creates "pfall_app"`}},
		{"restore --database", []string{"restore", "--database", "pfall_app", "-f", archive, "-d", s.ConnString("pfdst")}, exitOK,
			[]string{`✓ archive: ` + archive + `: database "pfall_app" of PostgreSQL`, fmt.Sprintf("✓ target database: %q is empty", s.Name("pfdst")), "✓ encoding: "}},
		{"restore --database of no such database", []string{"restore", "--database", "nope", "-f", archive, "-d", s.ConnString("pfdst")}, exitFailure,
			[]string{`✗ archive: ` + archive + `: the archive holds no database "nope" (it holds "pfall_app", "pfall_big", "postgres")`}},
		{"clone --all into its own source", []string{"clone", "--all", "--source", src, "--target", src}, exitUsage,
			[]string{"✗ distinct servers: --source and --target are the same server"}},
		{"clone --all ready", []string{"clone", "--all", "--source", src, "--target", s.ConnString("postgres"), "--exclude-database", "postgres"}, exitOK,
			[]string{`✓ databases: 2: "pfall_app", "pfall_big"; skipped: "postgres" (--exclude-database)`, "✓ pg_restore: ", "✓ roles: ", "✓ server journal: none",
				`✓ database "pfall_app": read privileges: `, `✓ database "pfall_app": target database: "pfall_app" does not exist: created`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := pgsprint(t, nil, append([]string{"preflight"}, tc.args...)...)
			t.Logf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d", r.code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if tc.code == exitUsage {
				checkOneLine(t, r.stderr)
			}
		})
	}
	if after := state(); after != before {
		t.Errorf("preflight changed something:\nbefore: %s\nafter:  %s", before, after)
	}
}
