package pg_test

import (
	"strings"
	"testing"

	. "github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func TestConnOptionsConfig(t *testing.T) {
	t.Setenv("PGPASSFILE", "/nonexistent")
	for _, tc := range []struct {
		name                 string
		opts                 ConnOptions
		host, user, database string
		port                 uint16
		wantErr              string
	}{
		{name: "plain name", opts: ConnOptions{DSN: "my db", Host: "h1", Port: "6000", User: "u1"},
			host: "h1", port: 6000, user: "u1", database: "my db"},
		{name: "keyword string wins over flags", opts: ConnOptions{DSN: "host=h2 dbname=d2", Host: "h1", User: "u1"},
			host: "h2", port: 5432, user: "u1", database: "d2"},
		{name: "uri", opts: ConnOptions{DSN: "postgresql://u3@h3:7000/d3"},
			host: "h3", port: 7000, user: "u3", database: "d3"},
		{name: "uri with flags", opts: ConnOptions{DSN: "postgresql://h3/d3", Host: "h1"}, wantErr: "cannot be combined"},
		{name: "hostile quoting", opts: ConnOptions{DSN: `it's a \ "db"`, Host: "/tmp/sock dir"},
			host: "/tmp/sock dir", port: 5432, database: `it's a \ "db"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.opts.Config()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host || cfg.Port != tc.port || cfg.Database != tc.database || (tc.user != "" && cfg.User != tc.user) {
				t.Errorf("got host=%q port=%d user=%q db=%q", cfg.Host, cfg.Port, cfg.User, cfg.Database)
			}
		})
	}
}

// TestChildConn: the connection string given to pg_dump and pg_restore
// reaches the same server and database with the user's options intact, but
// carries no password.
func TestChildConn(t *testing.T) {
	t.Setenv("PGPASSFILE", "/nonexistent")
	ca := pgtest.NewTLS(t).CAFile
	for _, tc := range []struct {
		name     string
		opts     ConnOptions
		database string // retarget to this database; "" keeps it
		want     string
	}{
		{"uri with password", ConnOptions{DSN: "postgresql://u:s3cret@h:5433/d?sslmode=verify-ca&sslrootcert=" + ca}, "",
			"postgresql://u@h:5433/d?sslmode=verify-ca&sslrootcert=" + ca},
		{"uri retargeted", ConnOptions{DSN: "postgresql://u:s3cret@h/d"}, "new db",
			"postgresql://u@h/new%20db"},
		{"keyword string keeps TLS options", ConnOptions{DSN: "host=h dbname=d sslmode=verify-full sslrootcert='" + ca + "'", User: "u"}, "",
			"user='u' host=h dbname=d sslmode=verify-full sslrootcert='" + ca + "' dbname='d'"},
		{"keyword string with password is rebuilt", ConnOptions{DSN: "host=h port=5433 user=u dbname=d password=s3cret sslmode=disable"}, "",
			"host='h' port=5433 user='u' dbname='d' sslmode=disable"},
		{"plain name retargeted", ConnOptions{DSN: "d", Host: "h"}, "other",
			"host='h' dbname='d' dbname='other'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", "")
			cfg, err := tc.opts.Config()
			if err != nil {
				t.Fatal(err)
			}
			if tc.database != "" {
				cfg = cfg.Copy()
				cfg.Database = tc.database
			}
			dsn, env := ChildConn(cfg)
			if dsn != tc.want {
				t.Errorf("child DSN\n got %s\nwant %s", dsn, tc.want)
			}
			if strings.Contains(dsn, "s3cret") {
				t.Errorf("child DSN holds the password: %s", dsn)
			}
			if strings.Contains(tc.opts.DSN, "s3cret") && (len(env) != 1 || env[0] != "PGPASSWORD=s3cret") {
				t.Errorf("child env = %v", env)
			}
		})
	}
}

func TestCopyColumns(t *testing.T) {
	if got := CopyColumns(nil); got != "" {
		t.Errorf("no columns: %q", got)
	}
	if got := CopyColumns([]string{"a", `b"c`, "Ü x"}); got != ` ("a", "b""c", "Ü x")` {
		t.Errorf("got %s", got)
	}
}
