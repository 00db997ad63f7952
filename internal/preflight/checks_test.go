package preflight

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestChecks runs each check of a target's limits and rights on a server
// of its own (roles and limits are server-wide): a role's and a
// database's CONNECTION LIMIT against -j, CREATE on the database and on
// public, a read-only database, and the TOAST a table's size counts.
func TestChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	for _, sql := range []string{
		"CREATE ROLE limited LOGIN CONNECTION LIMIT 4", "CREATE ROLE plain LOGIN",
		"CREATE DATABASE few OWNER plain CONNECTION LIMIT 4", "CREATE DATABASE mine OWNER plain", "CREATE DATABASE theirs",
		"CREATE DATABASE nopublic", "CREATE DATABASE readonly OWNER plain", "CREATE DATABASE toast",
	} {
		if err := c.Exec(ctx, "postgres", sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	for db, sql := range map[string]string{
		"nopublic": "GRANT CREATE ON DATABASE nopublic TO plain; REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"readonly": "ALTER DATABASE readonly SET default_transaction_read_only = on",
		"toast": `CREATE TABLE docs (id int PRIMARY KEY, body text); ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
			INSERT INTO docs SELECT i, repeat(md5(i::text), 20000) FROM generate_series(1, 4) i`,
	} {
		if err := c.Exec(ctx, db, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var waitGone func(t *testing.T, pid uint32)
	connect := func(t *testing.T, db, user string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(pgtest.KeywordConnString(map[string]string{"host": c.SocketDir(), "port": strconv.Itoa(c.Port()), "user": user, "dbname": db}))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pg.Connect(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			pid := conn.PgConn().PID()
			conn.Close(context.Background())
			waitGone(t, pid)
		})
		return conn
	}
	// A closed connection's backend leaves pg_stat_activity a moment
	// after the client closes it, and the next case counts the role's
	// open connections: wait until it is gone.
	admin, err := pgx.Connect(ctx, pgtest.KeywordConnString(map[string]string{"host": c.SocketDir(), "port": strconv.Itoa(c.Port()), "user": pgtest.SuperuserName, "dbname": "postgres"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	waitGone = func(t *testing.T, pid uint32) {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			var n int
			if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
		}
		t.Fatalf("backend %d still in pg_stat_activity 10 s after its connection closed", pid)
	}
	inPublic := &archive.Manifest{Tables: []archive.Table{{Schema: "public", Name: "t"}}}
	room := func(jobs int) func(*pgx.Conn) error {
		return func(conn *pgx.Conn) error { _, err := pg.ConnectionRoom(ctx, conn, jobs, jobs+1); return err }
	}
	create := func(dataOnly bool) func(*pgx.Conn) error {
		return func(conn *pgx.Conn) error { return restore.CanCreate(ctx, conn, inPublic, dataOnly) }
	}
	for _, tc := range []struct {
		name, db, user string
		check          func(*pgx.Conn) error
		fail           string // "" passes
	}{
		{"role limit fits -j 2", "mine", "limited", room(2), ""},
		{"role limit below -j 3", "mine", "limited", room(3), `role "limited", but its CONNECTION LIMIT is 4 and 1 are open now`},
		{"superuser above a role limit", "few", pgtest.SuperuserName, room(8), ""},
		{"database limit fits -j 2", "few", "plain", room(2), ""},
		{"database limit below -j 3", "few", "plain", room(3), `database "few", but its CONNECTION LIMIT is 4`},
		{"owner creates", "mine", "plain", create(false), ""},
		{"no CREATE on the database", "theirs", "plain", create(false), `no CREATE privilege on the target database "theirs"`},
		{"no CREATE on the database, data only", "theirs", "plain", create(true), `no CREATE privilege on the target database "theirs"`},
		{"no CREATE on public", "nopublic", "plain", create(false), `no CREATE privilege on schema "public"`},
		{"no CREATE on public, data only", "nopublic", "plain", create(true), ""},
		{"read-only database", "readonly", "plain", create(false), "is read-only (default_transaction_read_only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(connect(t, tc.db, tc.user))
			switch {
			case tc.fail == "" && err != nil:
				t.Errorf("want no failure, got %v", err)
			case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
				t.Errorf("want a failure with %q, got %v", tc.fail, err)
			}
		})
	}
	t.Run("TOAST counted", func(t *testing.T) {
		_, v, err := dump.Readable(ctx, connect(t, "toast", pgtest.SuperuserName), filter.Options{}, true)
		if err != nil {
			t.Fatal(err)
		}
		if v.Toast < 2<<20 || v.Heap > 64<<10 {
			t.Errorf("4 rows of 640 kB each: heap %d, TOAST %d; want a small heap and over 2 MiB of TOAST", v.Heap, v.Toast)
		}
	})
}
