package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/verify"
)

// SchemaDump returns verify.SchemaDump (pg_dump --schema-only, normalized)
// of the database behind connString, failing the test on error.
func SchemaDump(t testing.TB, binDir, connString string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := verify.SchemaDump(ctx, binDir, connString)
	if err != nil {
		t.Fatalf("pgtest.SchemaDump: %v", err)
	}
	return out
}

// RequireSameSchema dumps the schemas of the databases behind connection
// strings a and b with the pg_dump in binDir and fails the test, showing a
// unified-style diff of the first differences, unless they are identical.
func RequireSameSchema(t testing.TB, binDir, a, b string) {
	t.Helper()
	da := SchemaDump(t, binDir, a)
	db := SchemaDump(t, binDir, b)
	if d := verify.SchemaDiff(da, db); d != "" {
		t.Fatalf("schemas differ (- %s, + %s):\n%s", redactConn(a), redactConn(b), d)
	}
}

// redactConn drops any password from a connection string before it is
// printed in a failure message.
func redactConn(s string) string {
	cfg, err := pgconn.ParseConfig(s)
	if err != nil {
		return "(unparsable connection string)"
	}
	return fmt.Sprintf("db %q on %s:%d", cfg.Database, cfg.Host, cfg.Port)
}
