package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// TestMask makes masked development copies of pgtest.MaskSQL: into an
// uncompressed archive file whose raw bytes hold none of the original
// values, listed as masked and restored; by a clone of a subset keeping
// every row, which gives the very same tables (deterministic across runs,
// dump and clone alike); and by
// a pipe of an encrypted subset, whose masked e-mails are the whole
// copy's. Each copy restores with every constraint valid, unique columns
// unique, the join on the masked foreign key and the match across tables
// as in the source, and compare says it is a masked development copy.
// Rules that cannot run are refused (exit 2), and mask check reports an
// unknown column, a wrong type and a column left unmasked (exit 1).
func TestMask(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	src := pgtest.DB(t, c, "mask src")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Exec(ctx, src, pgtest.MaskSQL()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rules, secret := filepath.Join(dir, "dev.mask"), filepath.Join(dir, "secret")
	if err := os.WriteFile(rules, []byte(pgtest.MaskRules), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	masking := []string{"--mask-file", rules, "--mask-secret-file", secret}
	const join = "SELECT count(*) FROM crm.logins l JOIN crm.users u ON u.email = l.user_email"
	check := func(t *testing.T, dst string, users string) {
		t.Helper()
		conn := c.ConnString(dst)
		for sql, want := range map[string]string{
			"SELECT count(*) FROM crm.users":              users,
			"SELECT count(DISTINCT email) FROM crm.users": users,
			"SELECT count(*) FROM crm.users WHERE email LIKE '%" + pgtest.MaskDomain + "' OR full_name LIKE '%" + pgtest.MaskSurname + "%' OR phone LIKE '" + pgtest.MaskPhone + "%' OR bio LIKE '" + pgtest.MaskBio + "%' OR api_token = md5(id::text)": "0",
			"SELECT count(*) FROM crm.users WHERE score NOT BETWEEN 1 AND 100":                                            "0",
			"SELECT count(*) FROM crm.logins WHERE ip IS NOT NULL":                                                        "0",
			"SELECT count(*) FROM pg_catalog.pg_constraint WHERE connamespace = 'crm'::regnamespace AND NOT convalidated": "0",
		} {
			if got := pgtest.Scalar(t, conn, sql); got != want {
				t.Errorf("%s: %s, want %s", sql, got, want)
			}
		}
		if users == "200" {
			if got, want := pgtest.Scalar(t, conn, join), pgtest.Scalar(t, c.ConnString(src), join); got != want {
				t.Errorf("logins joined to users on the masked e-mail: %s, the source %s", got, want)
			}
			const orphans = "SELECT count(*) FROM crm.events e WHERE NOT EXISTS (SELECT FROM crm.users u WHERE u.email = e.email)"
			if got := pgtest.Scalar(t, conn, orphans); got != "0" {
				t.Errorf("events whose masked e-mail no masked user has: %s", got)
			}
		}
		r := pgsprint(t, nil, "compare", "-j", "2", "--source", c.ConnString(src), "--target", conn)
		if r.code != 0 || !strings.Contains(r.stdout, "target is a masked development copy: 12 columns of 5 tables") {
			t.Errorf("compare with the source: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	t.Run("file, clone, pipe", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "dev.pgs")
		mustPgsprint(t, append([]string{"dump", "-q", "-j", "2", "-Z", "none", "-d", c.ConnString(src), "-f", file}, masking...)...)
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "@example.com") {
			t.Fatal("the archive is not plain COPY text: no masked e-mail in it")
		}
		for _, orig := range []string{pgtest.MaskDomain, pgtest.MaskSurname, strings.TrimSpace(pgtest.MaskPhone), pgtest.MaskBio, "c4ca4238a0b923820dcc509a6f75849b" /* md5('1') */, "10.0.1.1"} {
			if strings.Contains(string(raw), orig) {
				t.Errorf("the archive holds the original %q", orig)
			}
		}
		if r := mustPgsprint(t, "list", file); !strings.Contains(r.stdout, "masked:     masked development copy: 12 columns of 5 tables") ||
			!strings.Contains(r.stdout, `"crm"."users"."born" = dateshift:30`) || strings.Contains(r.stdout, "correct horse") {
			t.Errorf("list:\n%s", r.stdout)
		}
		restored := pgtest.DB(t, c, "mask file")
		mustPgsprint(t, "restore", "-q", "-j", "2", "-f", file, "-d", c.ConnString(restored))
		check(t, restored, "200")

		cloned := pgtest.DB(t, c, "mask clone")
		// A subset that keeps every row: masked alike, whatever chose the rows.
		mustPgsprint(t, append([]string{"clone", "-q", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(cloned),
			"--subset", "crm.users: id > 0", "--subset-children"}, masking...)...)
		check(t, cloned, "200")
		pgtest.RequireData(t, c.ConnString(restored), c.ConnString(cloned))

		key, pub, _ := writeIdentity(t, t.TempDir(), "key.txt")
		piped := pgtest.DB(t, c, "mask pipe")
		cmds := [][]string{
			append([]string{"pgsprint", "dump", "-q", "-f", "-", "-j", "2", "-d", c.ConnString(src), "--encrypt-to", pub,
				"--subset", "crm.users: id <= 50", "--subset-children", "--subset-others", "none"}, masking...),
			{"pgsprint", "restore", "-q", "-f", "-", "-j", "2", "--identity", key, "-d", c.ConnString(piped)},
		}
		for i, r := range runPipeline(t, cmds...) {
			if r.code != 0 {
				t.Fatalf("%s: exit %d: %s", cmds[i][:2], r.code, r.stderr)
			}
		}
		check(t, piped, "50")
		const emails = "SELECT string_agg(email, ',' ORDER BY id) FROM crm.users WHERE id <= 50"
		if a, b := pgtest.Scalar(t, c.ConnString(piped), emails), pgtest.Scalar(t, c.ConnString(restored), emails); a != b {
			t.Errorf("the subset's masked e-mails differ from the whole copy's:\n%s\n%s", a, b)
		}
		const logins = "SELECT count(*) FROM crm.logins"
		if got, want := pgtest.Scalar(t, c.ConnString(piped), logins), pgtest.Scalar(t, c.ConnString(src), logins+" WHERE user_email IN (SELECT email FROM crm.users WHERE id <= 50)"); got != want {
			t.Errorf("the subset's logins: %s, want %s", got, want)
		}

		// The same subset through s3://: the object store is only where
		// the bytes live, the masked rows are the pipe's.
		srv := remotetest.StartS3(t)
		env := srv.Env(srv.Endpoint)
		loc := "s3://" + srv.Bucket(t) + "/dev/masked.pgs"
		if r := pgsprint(t, env, append([]string{"dump", "-q", "-j", "2", "-d", c.ConnString(src), "-f", loc,
			"--subset", "crm.users: id <= 50", "--subset-children", "--subset-others", "none"}, masking...)...); r.code != 0 {
			t.Fatalf("dump to %s: exit %d: %s", loc, r.code, r.stderr)
		}
		fromS3 := pgtest.DB(t, c, "mask s3")
		if r := pgsprint(t, env, "restore", "-q", "-j", "2", "-f", loc, "-d", c.ConnString(fromS3)); r.code != 0 {
			t.Fatalf("restore from %s: exit %d: %s", loc, r.code, r.stderr)
		}
		check(t, fromS3, "50")
		pgtest.RequireData(t, c.ConnString(piped), c.ConnString(fromS3))
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--mask", "crm.users.email=email"}, "--mask needs a secret"},
			{[]string{"--mask", "crm.users.id=number:1:10", "--mask-secret-file", secret}, `"crm"."users"."id": in a primary key or unique index`},
			{[]string{"--mask", "crm.users.email=email", "--mask-secret-file", secret}, `foreign key "logins_user_email_fkey"`},
			// An unknown table is a usage error, as an unknown --subset table.
			{[]string{"--mask", "crm.nope.x=email", "--mask-secret-file", secret}, `no table "crm"."nope"`},
			{[]string{"--subset", "crm.nope: id < 5"}, `no table crm.nope`},
			{[]string{"--mask", "crm.users.email=email", "--mask-secret-file", short}, "the mask secret is 1 bytes: at least 16 needed"},
		} {
			r := pgsprint(t, nil, append([]string{"dump", "-d", c.ConnString(src), "-f", filepath.Join(t.TempDir(), "x.pgs")}, tc.args...)...)
			checkOneError(t, r.code, exitUsage, r.stderr, tc.want)
		}
		r := pgsprint(t, nil, append([]string{"clone", "--source", c.ConnString(src), "--target", c.ConnString(src), "--resume", "--snapshot", "00000003-00000002-1"}, masking...)...)
		checkOneError(t, r.code, exitUsage, r.stderr, "--mask does not take --resume")
	})
	t.Run("mask check", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			{masking, 0, `"email": user1@` + pgtest.MaskDomain + ` -> `},
			{[]string{"--mask", "crm.users.nope=email", "--mask-secret-file", secret}, 1, `error: "crm"."users"."nope": no column "nope"`},
			{[]string{"--mask", "crm.users.score=email", "--mask-secret-file", secret}, 1, "rule email writes text, not integer"},
			{[]string{"--mask", "crm.users.email=email", "--mask", "crm.logins.user_email=email", "--mask-secret-file", secret}, 1,
				`warning: "crm"."users"."api_token" is not masked and its name looks sensitive`},
			{[]string{"--mask", "crm.users.email=email"}, 2, "--mask needs a secret"},
		} {
			r := pgsprint(t, nil, append([]string{"mask", "check", "-d", c.ConnString(src)}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) || strings.Contains(r.stdout, "correct horse") {
				t.Errorf("mask check %v: exit %d, want %d and %q:\n%s%s", tc.args, r.code, tc.code, tc.want, r.stdout, r.stderr)
			}
		}
	})
}
