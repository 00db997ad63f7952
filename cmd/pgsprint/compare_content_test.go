package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestCompareDevCopyTampered makes a subset clone and a masked clone of
// pgtest.MaskSQL, tampers with each (and undoes it), and checks compare's
// exit code and the table and key it names. On main before issue 42,
// compare counted rows only on such copies: every tampered case exited 0.
func TestCompareDevCopyTampered(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := pgtest.DB(t, c, "cmpdev src")
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
	subset, masked := pgtest.DB(t, c, "cmpdev subset"), pgtest.DB(t, c, "cmpdev masked")
	mustPgsprint(t, "clone", "-q", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(subset),
		"--subset", "crm.users: id <= 50", "--subset-children", "--subset-others", "none")
	mustPgsprint(t, "clone", "-q", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(masked),
		"--mask-file", rules, "--mask-secret-file", secret)
	// swapNames swaps two users' masked names: undone by itself, and
	// every count and the set of values as before.
	const swapNames = "UPDATE crm.users u SET full_name = v.full_name FROM crm.users v WHERE (u.id, v.id) IN ((7, 8), (8, 7))"
	for _, tc := range []struct {
		name, db      string
		tamper, undo  string
		withSecret    bool
		code          int
		want, wantNot string
	}{
		{name: "subset", db: subset, want: "0 different"},
		{name: "subset, row inserted", db: subset,
			tamper: "INSERT INTO crm.users VALUES (1000, 'x@y.z', 'X', NULL, NULL, NULL, 1, NULL)", undo: "DELETE FROM crm.users WHERE id = 1000",
			code: 1, want: `DIFFERENT: crm.users: 1 rows differ (the copy is the target); first: row ("id")=(1000) is only in the copy`},
		{name: "masked", db: masked, want: "masked columns left out): 0 different"},
		{name: "masked, secret", db: masked, withSecret: true, want: "masked columns recomputed with the secret): 0 different"},
		{name: "masked, unmasked column changed", db: masked,
			tamper: "UPDATE crm.logins SET at = at + interval '1 day' WHERE id = 5", undo: "UPDATE crm.logins SET at = at - interval '1 day' WHERE id = 5",
			code: 1, want: `DIFFERENT: crm.logins: 1 rows differ (the copy is the target); first: row ("id")=(5): columns "at" differ`},
		{name: "masked, masked column changed, secret", db: masked, withSecret: true,
			tamper: swapNames, undo: swapNames,
			code: 1, want: `DIFFERENT: crm.users: 2 rows differ (the copy is the target); first: row ("id")=(7): columns "full_name" differ`},
		{name: "masked, masked column changed, no secret", db: masked, tamper: swapNames, undo: swapNames, want: "0 different"},
	} {
		if tc.tamper != "" {
			if err := c.Exec(ctx, tc.db, tc.tamper); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"compare", "-j", "2", "--source", c.ConnString(src), "--target", c.ConnString(tc.db)}
		if tc.withSecret {
			args = append(args, "--mask-secret-file", secret)
		}
		r := pgsprint(t, nil, args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.want) || (tc.wantNot != "" && strings.Contains(r.stdout+r.stderr, tc.wantNot)) {
			t.Errorf("%s: exit %d, want %d and %q:\n%s%s", tc.name, r.code, tc.code, tc.want, r.stdout, r.stderr)
		}
		if tc.undo != "" {
			if err := c.Exec(ctx, tc.db, tc.undo); err != nil {
				t.Fatal(err)
			}
		}
	}
}
