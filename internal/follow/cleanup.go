package follow

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// hasCapture reports whether conn's database holds any of the DDL capture
// objects of slot's follow (the table, the functions, the event
// triggers): what a killed clone or finish may leave on either side.
func hasCapture(ctx context.Context, conn *pgx.Conn, slot string) (bool, error) {
	c := captureNames(slot)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = ANY ($2))
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = $3 AND p.proname = ANY ($2))`,
		c.table, c.raw, captureSchema).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for the DDL capture: %w", err)
	}
	return exists, nil
}

// dropStatements lists what removes slot's follow's DDL capture from one
// side, in order: the event triggers first (so that nothing records the
// drops), then the table and every function. dropCapture runs them and
// CaptureCleanupSQL prints them: one list, so that the cleanup printed
// for a killed run removes all that abort removes.
func (c capture) dropStatements() []string {
	var stmts []string
	for _, t := range c.triggers {
		stmts = append(stmts, "DROP EVENT TRIGGER IF EXISTS "+t)
	}
	return append(stmts, "DROP TABLE IF EXISTS "+c.table,
		"DROP FUNCTION IF EXISTS "+c.hook+"()",
		"DROP FUNCTION IF EXISTS "+c.record+"(text, text, text, text)",
		"DROP FUNCTION IF EXISTS "+c.split+"(text, boolean)",
		"DROP FUNCTION IF EXISTS "+c.apply+"()")
}

// CaptureCleanupSQL is what removes slot's follow's DDL capture from one
// side by hand (the event triggers first, then the table, the functions,
// and the schema when nothing else is in it), for messages; follow abort
// does the same.
func CaptureCleanupSQL(slot string) string {
	stmts := append(captureNames(slot).dropStatements(), "DROP SCHEMA IF EXISTS "+pg.Ident(captureSchema))
	return strings.Join(stmts, "; ")
}
