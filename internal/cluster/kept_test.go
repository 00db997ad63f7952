package cluster

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestKeptRoleReport restores globals into a server whose roles exist:
// whatever is kept of each is reported attribute by attribute (flags,
// CONNECTION LIMIT, VALID UNTIL, password, settings, comment), the
// password never printed, and a role that agrees with the archive is not
// reported at all.
func TestKeptRoleReport(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := pgtest.New(t)
	if err := c.Exec(ctx, "postgres", `
		CREATE ROLE bob NOLOGIN CONNECTION LIMIT 3;
		ALTER ROLE bob SET work_mem TO '4MB';
		COMMENT ON ROLE bob IS 'theirs';
		CREATE ROLE same LOGIN PASSWORD 'same-pw' VALID UNTIL '2040-01-01 00:00:00+00';
		ALTER ROLE same SET search_path TO 'app', 'public';
		COMMENT ON ROLE same IS 'ours';
		CREATE ROLE carol LOGIN PASSWORD 'theirs-pw'`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var samePW string
	if err := conn.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = 'same'").Scan(&samePW); err != nil {
		t.Fatal(err)
	}
	script := `CREATE ROLE bob;
ALTER ROLE bob WITH NOSUPERUSER INHERIT NOCREATEROLE NOCREATEDB LOGIN NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 5 PASSWORD 'SCRAM-SHA-256$4096:secret-hash' VALID UNTIL '2030-01-01 00:00:00+00';
ALTER ROLE bob SET work_mem TO '8MB';
COMMENT ON ROLE bob IS 'archived';
CREATE ROLE same;
ALTER ROLE same WITH NOSUPERUSER INHERIT NOCREATEROLE NOCREATEDB LOGIN NOREPLICATION NOBYPASSRLS PASSWORD '` + samePW + `' VALID UNTIL '2040-01-01 00:00:00+00';
ALTER ROLE same SET search_path TO 'app', 'public';
COMMENT ON ROLE same IS 'ours';
CREATE ROLE carol;
ALTER ROLE carol WITH LOGIN PASSWORD 'md5other';
CREATE ROLE dave;
ALTER ROLE dave WITH LOGIN CONNECTION LIMIT 2;
`
	// The globals as read: with the passwords, or without them as
	// pg_dumpall --no-role-passwords (dump --all --no-role-passwords).
	tools, err := pgbin.Find(ctx, c.Version())
	if err != nil {
		t.Fatal(err)
	}
	for _, without := range []bool{false, true} {
		read, noPasswords, err := readGlobals(ctx, conn, conn.Config(), tools, without)
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(read), samePW); has == without || noPasswords != without {
			t.Errorf("globals read with --no-role-passwords %v hold the password: %v (reported without: %v)", without, has, noPasswords)
		}
	}
	rep, err := applyGlobals(ctx, conn, script, GlobalsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bob", "same", "carol"}; !reflect.DeepEqual(rep.KeptRoles, want) || rep.Roles != 1 {
		t.Errorf("kept %v and created %d, want %v and 1 (dave)", rep.KeptRoles, rep.Roles, want)
	}
	want := []string{
		"bob: LOGIN in the archive, NOLOGIN on the target, CONNECTION LIMIT 5 in the archive, 3 on the target, " +
			"password in the archive not applied (none on the target), VALID UNTIL 2030-01-01 00:00:00+00 in the archive, none on the target, " +
			"setting work_mem = 8MB in the archive not applied, its comment in the archive not applied",
		"carol: password in the archive not applied (the target's differs)",
	}
	if !reflect.DeepEqual(rep.DifferentRoles, want) {
		t.Errorf("reported\n%s\nwant\n%s", strings.Join(rep.DifferentRoles, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range rep.DifferentRoles {
		if strings.Contains(d, "secret-hash") || strings.Contains(d, "SCRAM") {
			t.Errorf("a password is printed: %s", d)
		}
	}
	var limit int
	if err := conn.QueryRow(ctx, "SELECT rolconnlimit FROM pg_roles WHERE rolname = 'bob'").Scan(&limit); err != nil || limit != 3 {
		t.Errorf("bob's connection limit is %d (%v), want the target's 3, kept", limit, err)
	}
}
