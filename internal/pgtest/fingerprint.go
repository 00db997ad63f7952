package pgtest

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/compare"
)

// Fingerprint returns compare.Fingerprint of the database behind connString,
// failing the test on error.
func Fingerprint(t testing.TB, connString string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fp, err := compare.Fingerprint(ctx, connString)
	if err != nil {
		t.Fatalf("pgtest.Fingerprint of %s: %v", redactConn(connString), err)
	}
	return fp
}

// RequireSameData fingerprints the databases behind connection strings a and
// b and fails the test, listing every differing key, unless they hold the
// same data.
func RequireSameData(t testing.TB, a, b string) {
	t.Helper()
	fa := Fingerprint(t, a)
	fb := Fingerprint(t, b)
	if d := compare.FingerprintDiff(fa, fb); len(d) > 0 {
		t.Fatalf("data differs (a = %s, b = %s), %d keys:\n%s", redactConn(a), redactConn(b), len(d), strings.Join(d, "\n"))
	}
}

// RequireData compares the row hashes of the named relations (quoted
// qualified names, or plain ones as pg_dump prints them) in the databases
// at a (the source) and b (the restored copy).
func RequireData(t testing.TB, a, b string, rels ...string) {
	t.Helper()
	fa, fb := Fingerprint(t, a), Fingerprint(t, b)
	for _, rel := range rels {
		key := FingerprintKey(rel)
		if fa[key] == "" || fa[key] != fb[key] {
			t.Errorf("%s: source %q, restored %q", rel, fa[key], fb[key])
		}
	}
}

// OnlyRelations fails unless the user tables, views and sequences of the
// database at conn are exactly rels (plus pgsprint's own nothing: the
// journal must be gone).
func OnlyRelations(t testing.TB, conn string, rels ...string) {
	t.Helper()
	fp := Fingerprint(t, conn)
	want := map[string]bool{}
	for _, r := range rels {
		want[FingerprintKey(r)] = true
	}
	for k := range fp {
		if !want[k] && !strings.HasPrefix(k, "large object") {
			t.Errorf("unexpected relation restored: %s", k)
		}
	}
	for k := range want {
		if _, ok := fp[k]; !ok {
			t.Errorf("relation missing: %s", k)
		}
	}
}

// FingerprintKey turns app.orders or a quoted name into Fingerprint's
// format('%I.%I') key.
func FingerprintKey(rel string) string {
	if strings.HasPrefix(rel, `"`) {
		return rel
	}
	schema, name, _ := strings.Cut(rel, ".")
	return DumpIdent(schema) + "." + DumpIdent(name)
}

// plainIdent is what an identifier looks like when pg_dump prints it
// without quotes.
var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// DumpIdent quotes an identifier as pg_dump prints it: only when needed.
func DumpIdent(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
