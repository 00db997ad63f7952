package pgtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/compare"
)

// SchemaDump returns compare.SchemaDump (pg_dump --schema-only, normalized)
// of the database behind connString, or of the part pg_dump's selection
// flags pick, failing the test on error.
func SchemaDump(t testing.TB, binDir, connString string, selection ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := compare.SchemaDump(ctx, binDir, connString, selection...)
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
	if d := compare.SchemaDiff(da, db); d != "" {
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

// RequireSameSchemaAcrossVersions is RequireSameSchema for two databases on
// servers of different major versions, dumped with the same (newest)
// pg_dump. It first evens out what legitimately differs between the
// servers rather than between the databases, so that every other
// difference still fails the test:
//   - view bodies: servers >= 16 print single-table column references
//     without the table name; qualifiers are dropped inside CREATE VIEW and
//     CREATE MATERIALIZED VIEW statements;
//   - "GRANT ALL" on a table: a source older than 17 has no MAINTAIN
//     privilege, so its ALL prints as the explicit list of the others,
//     while the dump made by that source's pg_dump says ALL, which a newer
//     target grants in full;
//   - the public schema: owned by the bootstrap superuser before 15 and by
//     pg_database_owner from 15 on, with a different default ACL;
//   - range types: servers >= 14 give each a multirange type, which pg_dump
//     names in CREATE TYPE;
//   - procedures: servers >= 14 print their arguments' IN mode.
func RequireSameSchemaAcrossVersions(t testing.TB, binDir, a, b string) {
	t.Helper()
	da := normalizeAcrossVersions(SchemaDump(t, binDir, a))
	db := normalizeAcrossVersions(SchemaDump(t, binDir, b))
	if d := compare.SchemaDiff(da, db); d != "" {
		t.Fatalf("schemas differ beyond version differences (- %s, + %s):\n%s", redactConn(a), redactConn(b), d)
	}
}

// normalizeAcrossVersions applies RequireSameSchemaAcrossVersions's
// normalization to one normalized pg_dump --schema-only text.
func normalizeAcrossVersions(dump string) string { return compare.NormalizeAcrossVersions(dump) }
