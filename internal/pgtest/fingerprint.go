package pgtest

import (
	"context"
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
