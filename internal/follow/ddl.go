package follow

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// DDL during a follow is captured on the source and replayed on the
// target in order with the rows (docs/ARCHITECTURE.md, "DDL while
// following"): event triggers on the source (ddl_command_end, sql_drop,
// table_rewrite) insert each statement into a capture table that is itself
// published; on the target, an ENABLE ALWAYS trigger on the same table
// runs the statement inside the apply worker's transaction, so the rows
// written after it in the source's WAL find the target already changed.
// Statements that cannot be replayed exactly are recorded as stops, which
// follow status and finish name. Both sides hold the same objects, so the
// final comparison finds them equal; finish and abort remove them.

// captureSchema holds the capture objects on both sides.
const captureSchema = "pgsprint"

// targetFailed begins the reason of a stop the target recorded: a
// captured statement it could not run.
const targetFailed = "the target could not replay it: "

// splitSQL creates the statement lexer, recordSQL the recording function
// that uses it: PL/pgSQL, kept in files of their own so that they read
// (and are tested, ddl_split_test.go) as the SQL they are. Their
// {{names}} are replaced by captureSQL.
var (
	//go:embed ddl_split.sql
	splitSQL string
	//go:embed ddl_record.sql
	recordSQL string
)

// capture names one follow's capture objects.
type capture struct {
	table    string // quoted pgsprint.<slot>
	record   string // quoted function: records a statement (SECURITY DEFINER)
	split    string // quoted function: the statement lexer (ddl_split.sql)
	hook     string // quoted function: the event triggers'
	apply    string // quoted function: the target's trigger
	triggers [3]string
	// raw are the functions' and event triggers' names, unquoted.
	raw []string
}

func captureNames(slot string) capture {
	base := slot
	if len(base) > 50 {
		base = base[:50]
	}
	q := func(name string) string { return pg.Qualified(captureSchema, name) }
	return capture{
		table:  q(slot),
		record: q(base + "_record"),
		split:  q(base + "_split"),
		hook:   q(base + "_hook"),
		apply:  q(base + "_apply"),
		triggers: [3]string{pg.Ident(base + "_ddl"), pg.Ident(base + "_drop"),
			pg.Ident(base + "_rewrite")},
		raw: []string{base + "_record", base + "_split", base + "_hook", base + "_apply", base + "_ddl", base + "_drop", base + "_rewrite"},
	}
}

// captureSQL is what creates the capture objects, the same on both sides
// (so that the final comparison finds them equal): on the source the
// event triggers record, on the target (which has no publication of
// that name) they do nothing, and the target's trigger replays what the
// apply worker inserts (session_replication_role = replica there).
// partial: the follow covers a selection, whose condition (selected and
// not noData, on pg_class c and pg_namespace n) says which new tables
// join the publication; on the target, a statement on an object outside
// the selection (absent there) is skipped.
func captureSQL(n Names, partial bool, selected, noData string) []string {
	c := captureNames(n.Slot)
	pub := pg.Literal(n.Publication)
	partialSQL := map[bool]string{true: "true", false: "false"}[partial]
	lexer := strings.NewReplacer("{{split}}", c.split, "{{record}}", c.record, "{{pub}}", pub,
		"{{schema}}", pg.Literal(captureSchema), "{{table}}", c.table, "{{selected}}", selected, "{{noData}}", noData)
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + pg.Ident(captureSchema),
		`CREATE TABLE ` + c.table + ` (
			xid bigint NOT NULL, n int NOT NULL,
			tag text NOT NULL, object text NOT NULL, command text NOT NULL,
			search_path text NOT NULL, role text NOT NULL,
			action text NOT NULL CHECK (action IN ('apply', 'stop')), reason text NOT NULL,
			PRIMARY KEY (xid, n))`,
		lexer.Replace(splitSQL),
		lexer.Replace(recordSQL),
		// The event triggers' function keeps the statement's search_path
		// (no SET clause: it records it, to replay the statement under it;
		// so every name and operator in it is qualified) and reads the role
		// that ran it (SECURITY DEFINER changes neither the role setting nor
		// session_user). Only it may call the recording function: anything
		// that function records outside an event trigger is a stop.
		`CREATE FUNCTION ` + c.hook + `() RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER AS $body$
		BEGIN
			IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.=) 'replica' THEN
				RETURN;
			END IF;
			PERFORM ` + c.record + `(TG_EVENT, TG_TAG, pg_catalog.current_setting('search_path'),
				CASE WHEN pg_catalog.current_setting('role') OPERATOR(pg_catalog.=) 'none' THEN session_user::pg_catalog.text
				ELSE pg_catalog.current_setting('role') END);
		EXCEPTION WHEN OTHERS THEN
			RAISE WARNING 'pgsprint: this statement is not captured for the follow (%); the follow''s finish will find the difference', SQLERRM;
		END
		$body$`,
		`CREATE FUNCTION ` + c.apply + `() RETURNS trigger LANGUAGE plpgsql AS $body$
		DECLARE
			cmd text := NEW.command;
			old text := pg_catalog.current_setting('search_path');
			as_role boolean := NEW.role <> '' AND NEW.role <> current_user::text
				AND EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = NEW.role);
		BEGIN
			IF pg_catalog.current_setting('session_replication_role') <> 'replica' THEN
				RETURN NULL; -- on the source
			END IF;
			IF NEW.action = 'stop' THEN
				-- The rows that follow may no longer fit the target: its
				-- apply worker stops instead of failing on them over and over.
				EXECUTE 'ALTER SUBSCRIPTION ' || ` + pg.Literal(pg.Ident(n.Slot)) + ` || ' DISABLE';
				RETURN NULL;
			END IF;
			IF EXISTS (SELECT 1 FROM ` + c.table + ` WHERE action = 'stop') THEN
				RETURN NULL; -- after a stop, nothing more is replayed
			END IF;
			PERFORM pg_catalog.set_config('search_path', NEW.search_path, true);
			-- As the role that ran it, so that what it creates has the same
			-- owner; as the subscription's owner when that role may not
			-- (a clone without owners).
			IF as_role THEN
				BEGIN
					PERFORM pg_catalog.set_config('role', NEW.role, true);
					EXECUTE cmd;
					PERFORM pg_catalog.set_config('role', 'none', true);
					cmd := NULL;
				EXCEPTION WHEN insufficient_privilege THEN
					NULL;
				WHEN undefined_table OR undefined_object THEN
					IF NOT ` + partialSQL + ` THEN
						RAISE;
					END IF;
					cmd := NULL; -- an object outside the follow's selection
				END;
			END IF;
			IF cmd IS NULL THEN
				NULL;
			ELSIF ` + partialSQL + ` THEN
				BEGIN
					EXECUTE cmd;
				EXCEPTION WHEN undefined_table OR undefined_object THEN
					NULL; -- an object outside the follow's selection
				END;
			ELSE
				EXECUTE cmd;
			END IF;
			PERFORM pg_catalog.set_config('search_path', old, true);
			RETURN NULL;
		EXCEPTION WHEN OTHERS THEN
			-- A statement the target cannot run (the source ran it): a
			-- stop, named on the target's copy, instead of an apply worker
			-- failing on it over and over. Not a failure that may pass:
			-- a conflict, a lack of resources, a shutdown.
			IF SQLSTATE ~ '^(40|53|57|58|XX)' THEN
				RAISE;
			END IF;
			PERFORM pg_catalog.set_config('search_path', old, true);
			PERFORM pg_catalog.set_config('role', 'none', true);
			UPDATE ` + c.table + ` SET action = 'stop', reason = ` + pg.Literal(targetFailed) + ` || SQLERRM
				WHERE xid = NEW.xid AND n = NEW.n;
			EXECUTE 'ALTER SUBSCRIPTION ' || ` + pg.Literal(pg.Ident(n.Slot)) + ` || ' DISABLE';
			RETURN NULL;
		END
		$body$`,
		"REVOKE ALL ON FUNCTION " + c.record + "(text, text, text, text) FROM PUBLIC",
		"CREATE TRIGGER apply AFTER INSERT ON " + c.table + " FOR EACH ROW EXECUTE FUNCTION " + c.apply + "()",
		"ALTER TABLE " + c.table + " ENABLE ALWAYS TRIGGER apply",
		"CREATE EVENT TRIGGER " + c.triggers[0] + " ON ddl_command_end EXECUTE FUNCTION " + c.hook + "()",
		"CREATE EVENT TRIGGER " + c.triggers[1] + " ON sql_drop EXECUTE FUNCTION " + c.hook + "()",
		"CREATE EVENT TRIGGER " + c.triggers[2] + " ON table_rewrite EXECUTE FUNCTION " + c.hook + "()",
	}
}

// installCapture creates the capture objects on one side, in one
// transaction; on the source, pubAll false adds the capture table to the
// publication.
func installCapture(ctx context.Context, conn *pgx.Conn, n Names, f filter.Options, source, pubAll bool) error {
	selected, noData, err := f.Conditions("c", "n")
	if err != nil {
		return err
	}
	side := map[bool]string{true: "source", false: "target"}[source]
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		stmts := captureSQL(n, f.Active(), selected, noData)
		if source && !pubAll {
			stmts = append(stmts, "ALTER PUBLICATION "+pg.Ident(n.Publication)+" ADD TABLE "+captureNames(n.Slot).table)
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("create the DDL capture on the %s (%s): %w", side, pg.Shorten(strings.Join(strings.Fields(q), " "), 80), err)
			}
		}
		return nil
	})
}

// dropCapture removes the capture objects from one side (the event
// triggers first, so that nothing records the drops), and the schema
// when nothing else is in it.
func dropCapture(ctx context.Context, conn *pgx.Conn, slot string) error {
	exists, err := hasCapture(ctx, conn, slot)
	if err != nil || !exists {
		return err
	}
	stmts := captureNames(slot).dropStatements()
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("remove the DDL capture (%s): %w", q, err)
		}
	}
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pg.Ident(captureSchema))
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "2BP01") { // dependent_objects_still_exist: another follow's
		return fmt.Errorf("remove schema %s: %w", captureSchema, err)
	}
	return nil
}

// DDL is what a follow knows of the DDL run on the source since its clone.
type DDL struct {
	// Captured: the event triggers capture DDL on this side (a superuser
	// source and target); else Drift is the fallback's finding.
	Captured bool
	// Replayed counts the statements captured for the target to replay.
	Replayed int
	// Stops are the statements the target cannot replay: once there is
	// one, the target no longer follows the source's schema.
	Stops []Stop
	// Pending are the tables created on the source since the clone that
	// the target does not follow yet: finish copies them (read with the
	// source only).
	Pending []string
	// Drift lists, without capture, the differences between the followed
	// tables' columns on both sides (and, for a whole database, the tables
	// one side only has): DDL that was not followed.
	Drift []string
}

// Stop is a captured statement that the target does not replay.
type Stop struct {
	Tag, Object, Command, Reason string
}

func (s Stop) String() string {
	return fmt.Sprintf("%s %s (%s): %s", s.Tag, s.Object, pg.Shorten(strings.Join(strings.Fields(s.Command), " "), 200), s.Reason)
}

// Err is the error that stops a follow on DDL it does not follow, nil
// when there is none.
func (d *DDL) Err() error {
	switch {
	case d == nil:
		return nil
	case len(d.Stops) > 0:
		var s []string
		for _, st := range d.Stops {
			s = append(s, st.String())
		}
		return fmt.Errorf("DDL on the source that the target cannot follow: %s; the target no longer follows the source's schema: pgsprint follow abort, then clone again", strings.Join(s, "; "))
	case len(d.Drift) > 0:
		return fmt.Errorf("DDL on the source since the clone, not followed (capturing DDL needs superuser on both sides): %s; pgsprint follow abort, then clone again",
			pg.Shorten(strings.Join(d.Drift, "; "), 600))
	}
	return nil
}

// readDDL reads the capture table on conn's side: whether it exists, how
// many statements it holds and its stops.
func readDDL(ctx context.Context, conn *pgx.Conn, slot string) (*DDL, error) {
	c := captureNames(slot)
	d := &DDL{}
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", c.table).Scan(&d.Captured); err != nil {
		return nil, fmt.Errorf("look for the DDL capture: %w", err)
	}
	if !d.Captured {
		return d, nil
	}
	rows, err := conn.Query(ctx, "SELECT action, tag, object, command, reason FROM "+c.table+" ORDER BY xid, n")
	if err != nil {
		return nil, fmt.Errorf("read the DDL capture: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var action string
		var s Stop
		if err := rows.Scan(&action, &s.Tag, &s.Object, &s.Command, &s.Reason); err != nil {
			return nil, fmt.Errorf("read the DDL capture: %w", err)
		}
		if action == "stop" {
			d.Stops = append(d.Stops, s)
		} else {
			d.Replayed++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the DDL capture: %w", err)
	}
	return d, nil
}

// followDDL reads the DDL state of a follow: the source's capture table
// when sconn is given (else the target's copy, as far as it was applied);
// without capture, and with the source, the drift between both catalogs.
func followDDL(ctx context.Context, sconn, dconn *pgx.Conn, n Names, partial bool) (*DDL, error) {
	if sconn == nil {
		return readDDL(ctx, dconn, n.Slot)
	}
	d, err := readDDL(ctx, sconn, n.Slot)
	if err != nil {
		return nil, err
	}
	if d.Captured {
		// A statement the target failed to run is a stop on its copy only.
		t, err := readDDL(ctx, dconn, n.Slot)
		if err != nil {
			return nil, err
		}
		for _, s := range t.Stops {
			if strings.HasPrefix(s.Reason, targetFailed) {
				d.Stops = append(d.Stops, s)
			}
		}
		d.Pending, err = newTables(ctx, sconn, dconn, n)
		return d, err
	}
	d.Drift, err = drift(ctx, sconn, dconn, n.Publication, partial)
	return d, err
}

// drift compares the tables' columns (name and type) of both sides: the
// published tables for a selection, every table for a whole database
// (then a table on one side only is DDL too). It is the fallback when
// the source cannot capture DDL: it finds ALTER TABLE's column changes,
// CREATE TABLE and DROP TABLE, not indexes (finish's comparison does).
func drift(ctx context.Context, sconn, dconn *pgx.Conn, pub string, partial bool) ([]string, error) {
	var only []string
	if partial {
		var err error
		if only, err = publishedTables(ctx, sconn, pub); err != nil {
			return nil, err
		}
	}
	read := func(conn *pgx.Conn, side string) (map[string]string, error) {
		rows, err := conn.Query(ctx, `SELECT pg_catalog.format('%I.%I', n.nspname, c.relname),
			coalesce(pg_catalog.string_agg(pg_catalog.format('%I %s', a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY a.attnum), '')
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
			WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
			AND n.nspname NOT IN ('pg_catalog', 'information_schema', $2) AND n.nspname NOT LIKE 'pg\_toast%'
			AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'e')
			AND ($1::text[] IS NULL OR pg_catalog.format('%I.%I', n.nspname, c.relname) = ANY ($1))
			GROUP BY 1`, only, captureSchema)
		if err != nil {
			return nil, fmt.Errorf("read the %s's tables: %w", side, err)
		}
		m := map[string]string{}
		for rows.Next() {
			var name, cols string
			if err := rows.Scan(&name, &cols); err != nil {
				return nil, fmt.Errorf("read the %s's tables: %w", side, err)
			}
			m[name] = cols
		}
		return m, rows.Err()
	}
	a, err := read(sconn, "source")
	if err != nil {
		return nil, err
	}
	b, err := read(dconn, "target")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range sortedKeys(a, b) {
		ca, inA := a[k]
		cb, inB := b[k]
		switch {
		case inA && !inB && !partial:
			out = append(out, "table "+k+" created on the source")
		case !inA && inB && !partial:
			out = append(out, "table "+k+" dropped on the source")
		case inA && inB && ca != cb:
			out = append(out, fmt.Sprintf("columns of %s changed on the source: (%s), on the target (%s)", k, ca, cb))
		}
	}
	return out, nil
}

func sortedKeys(ms ...map[string]string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}
