package follow

import (
	"context"
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

// capture names one follow's capture objects.
type capture struct {
	table    string // quoted pgsprint.<slot>
	record   string // quoted function: records a statement (SECURITY DEFINER)
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
		hook:   q(base + "_hook"),
		apply:  q(base + "_apply"),
		triggers: [3]string{pg.Ident(base + "_ddl"), pg.Ident(base + "_drop"),
			pg.Ident(base + "_rewrite")},
		raw: []string{base + "_record", base + "_hook", base + "_apply", base + "_ddl", base + "_drop", base + "_rewrite"},
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
	return []string{
		"CREATE SCHEMA IF NOT EXISTS " + pg.Ident(captureSchema),
		`CREATE TABLE ` + c.table + ` (
			xid bigint NOT NULL, n int NOT NULL,
			tag text NOT NULL, object text NOT NULL, command text NOT NULL,
			search_path text NOT NULL, role text NOT NULL,
			action text NOT NULL CHECK (action IN ('apply', 'stop')), reason text NOT NULL,
			PRIMARY KEY (xid, n))`,
		// The statement's text is the top-level query: replayed alone
		// only when it is that one statement (not inside a function, a DO
		// block or a string of several statements); quotes, dollar quotes
		// and comments are skipped to find another semicolon.
		`CREATE FUNCTION ` + c.record + `(ev text, cmd_tag text, cmd_path text, cmd_role text) RETURNS void
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
		DECLARE
			q text := pg_catalog.current_query();
			act text := 'apply';
			why text := '';
			obj text;
			tmp boolean;
			own boolean;
			r record;
			b bytea;
			nb int;
			i int := 0;
			j int;
			k int;
			ch int;
			dq bytea;
			semi boolean := false;
			multi boolean := false;
			first int;
			w text := '';
			cols text;
		BEGIN
		-- A failure here must not fail the user's statement: it becomes a
		-- stop, and if even that cannot be written, a warning.
		BEGIN
			IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = ` + pub + `) THEN
				RETURN; -- the target's copy, or a publication already dropped
			END IF;
			IF cmd_tag ~ 'PUBLICATION|SUBSCRIPTION' THEN
				RETURN;
			END IF;
			IF ev = 'ddl_command_end' THEN
				IF cmd_tag LIKE 'DROP %' THEN
					RETURN; -- recorded at sql_drop
				END IF;
				-- The commands of an extension's script: replayed by its CREATE
				-- or ALTER EXTENSION, recorded once, at its own firing.
				SELECT pg_catalog.string_agg(DISTINCT d.object_identity, ', '), pg_catalog.bool_or(d.schema_name LIKE 'pg\_temp%'),
					pg_catalog.bool_and(d.schema_name = ` + pg.Literal(captureSchema) + `) OR pg_catalog.bool_or(d.in_extension)
					INTO obj, tmp, own FROM pg_catalog.pg_event_trigger_ddl_commands() d;
				-- A large object's owner, grants and comment: finish copies
				-- them with the objects (largeobjects.go), as it copies their
				-- contents, which no DDL touches.
				IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger_ddl_commands() d
					WHERE pg_catalog.lower(d.object_type) IS DISTINCT FROM 'large object') THEN
					RETURN;
				END IF;
			ELSIF ev = 'sql_drop' THEN
				IF cmd_tag NOT LIKE 'DROP %' THEN
					RETURN; -- a column or constraint an ALTER dropped: recorded at ddl_command_end
				END IF;
				SELECT pg_catalog.string_agg(d.object_identity, ', '), pg_catalog.bool_and(d.is_temporary),
					pg_catalog.bool_and(d.schema_name = ` + pg.Literal(captureSchema) + `)
					INTO obj, tmp, own FROM pg_catalog.pg_event_trigger_dropped_objects() d WHERE d.original;
			ELSIF ev = 'table_rewrite' THEN
				obj := pg_catalog.pg_event_trigger_table_rewrite_oid()::pg_catalog.regclass::text;
				IF pg_catalog.pg_event_trigger_table_rewrite_reason() & 2 = 0 THEN
					RETURN; -- a rewrite the target does the same way
				END IF;
				act := 'stop';
				why := 'it fills a new column row by row (a volatile default, an identity or serial column): the target would compute other values';
			ELSE
				RAISE EXCEPTION 'pgsprint: unknown event %', ev;
			END IF;
			IF tmp OR own THEN
				RETURN;
			END IF;
			IF act = 'apply' AND cmd_tag IN ('CREATE TABLE AS', 'SELECT INTO') THEN
				act := 'stop';
				why := 'it creates a table with rows: the target would compute them again and copy them too';
			END IF;
			IF act = 'apply' THEN
				-- On the bytes (every server encoding keeps ASCII as ASCII), so
				-- that a long text is read once: get_byte is O(1), a text's
				-- substr is not.
				b := pg_catalog.convert_to(q, pg_catalog.getdatabaseencoding());
				nb := pg_catalog.length(b);
				WHILE i < nb AND NOT multi LOOP
					ch := pg_catalog.get_byte(b, i);
					IF ch = 45 AND i + 1 < nb AND pg_catalog.get_byte(b, i + 1) = 45 THEN -- --
						j := pg_catalog.position(pg_catalog.substring(b, i + 3), '\x0a'::bytea);
						i := CASE WHEN j = 0 THEN nb ELSE i + 2 + j END;
					ELSIF ch = 47 AND i + 1 < nb AND pg_catalog.get_byte(b, i + 1) = 42 THEN -- /*
						j := pg_catalog.position(pg_catalog.substring(b, i + 3), '\x2a2f'::bytea);
						i := CASE WHEN j = 0 THEN nb ELSE i + 3 + j END;
					ELSIF ch IN (9, 10, 12, 13, 32) THEN
						i := i + 1;
					ELSIF ch = 59 THEN -- ;
						semi := true;
						i := i + 1;
					ELSE
						multi := semi;
						first := coalesce(first, i);
						IF ch IN (34, 39) THEN -- a quoted identifier or string
							j := pg_catalog.position(pg_catalog.substring(b, i + 2), pg_catalog.set_byte('\x00'::bytea, 0, ch));
							i := CASE WHEN j = 0 THEN nb ELSE i + j + 1 END;
						ELSIF ch = 36 AND (i = 0 OR NOT (pg_catalog.get_byte(b, i - 1) BETWEEN 48 AND 57
							OR pg_catalog.get_byte(b, i - 1) BETWEEN 65 AND 90 OR pg_catalog.get_byte(b, i - 1) BETWEEN 97 AND 122
							OR pg_catalog.get_byte(b, i - 1) IN (95, 36) OR pg_catalog.get_byte(b, i - 1) >= 128)) THEN -- $tag$
							k := i + 1;
							WHILE k < nb AND (pg_catalog.get_byte(b, k) BETWEEN 65 AND 90 OR pg_catalog.get_byte(b, k) BETWEEN 97 AND 122
								OR pg_catalog.get_byte(b, k) = 95) LOOP
								k := k + 1;
							END LOOP;
							IF k < nb AND pg_catalog.get_byte(b, k) = 36 THEN
								dq := pg_catalog.substring(b, i + 1, k - i + 1);
								j := pg_catalog.position(pg_catalog.substring(b, k + 2), dq);
								i := CASE WHEN j = 0 THEN nb ELSE k + j + pg_catalog.length(dq) END;
							ELSE
								i := i + 1;
							END IF;
						ELSE
							i := i + 1;
						END IF;
					END IF;
				END LOOP;
				IF first IS NOT NULL THEN
					k := first;
					WHILE k < nb AND (pg_catalog.get_byte(b, k) BETWEEN 65 AND 90 OR pg_catalog.get_byte(b, k) BETWEEN 97 AND 122) LOOP
						w := w || pg_catalog.chr(pg_catalog.get_byte(b, k));
						k := k + 1;
					END LOOP;
				END IF;
				IF multi OR pg_catalog.upper(w) IS DISTINCT FROM pg_catalog.split_part(cmd_tag, ' ', 1) THEN
					act := 'stop';
					why := 'it runs inside a function, procedure or DO block, or in one query string with other statements: pgsprint replays a statement only alone';
				END IF;
			END IF;
			IF act = 'apply' AND ev = 'ddl_command_end' AND cmd_tag = 'ALTER TABLE' THEN
				-- A new column's default evaluated once (now(), current_user):
				-- the target would evaluate it again, to another value.
				SELECT pg_catalog.string_agg(pg_catalog.format('%s.%I', a.attrelid::pg_catalog.regclass, a.attname), ', ') INTO cols
				FROM pg_catalog.pg_event_trigger_ddl_commands() d
				JOIN pg_catalog.pg_attribute a ON a.attrelid = d.objid AND a.atthasmissing AND NOT a.attisdropped
				JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
				WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
				AND ad.adbin::text ~ '\{(FUNCEXPR|SQLVALUEFUNCTION)'
				AND pg_catalog.strpos(pg_catalog.lower(q), pg_catalog.lower(a.attname)) > 0;
				IF cols IS NOT NULL THEN
					act := 'stop';
					why := 'the default of ' || cols || ' is evaluated once, when the column is added: the target would evaluate it again, to another value';
				END IF;
			END IF;
			IF ev = 'ddl_command_end' AND NOT (SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = ` + pub + `) THEN
				-- A table of the follow's selection with a replica identity joins
				-- the publication (partitions of a published table are in it).
				-- The selection's patterns without schema match the tables the
				-- statement's search_path sees (pg_catalog first, as ever).
				PERFORM pg_catalog.set_config('search_path', 'pg_catalog' || CASE WHEN cmd_path <> '' THEN ', ' || cmd_path ELSE '' END, true);
				FOR r IN SELECT DISTINCT c.oid::pg_catalog.regclass AS rel
					FROM pg_catalog.pg_event_trigger_ddl_commands() d
					LEFT JOIN pg_catalog.pg_index x ON x.indexrelid = d.objid
					JOIN pg_catalog.pg_class c ON c.oid = coalesce(x.indrelid, d.objid)
					JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
					WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
					AND c.relkind IN ('r', 'p') AND c.relpersistence = 'p'
					AND (c.relreplident IN ('f', 'i') OR c.relreplident = 'd' AND EXISTS (
						SELECT 1 FROM pg_catalog.pg_index k WHERE k.indrelid = c.oid AND k.indisprimary))
					AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t
						WHERE t.pubname = ` + pub + ` AND t.schemaname = n.nspname AND t.tablename = c.relname)
					AND (` + selected + `) AND NOT (` + noData + `)
				LOOP
					EXECUTE pg_catalog.format('ALTER PUBLICATION %I ADD TABLE %s', ` + pub + `, r.rel);
				END LOOP;
				PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
			END IF;
			INSERT INTO ` + c.table + ` SELECT pg_catalog.txid_current(), coalesce(pg_catalog.max(n), 0) + 1,
				cmd_tag, coalesce(obj, ''), q, coalesce(cmd_path, ''), coalesce(cmd_role, ''), act, why
				FROM ` + c.table + ` WHERE xid = pg_catalog.txid_current();
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
			BEGIN
				INSERT INTO ` + c.table + ` SELECT pg_catalog.txid_current(), coalesce(pg_catalog.max(n), 0) + 1,
					cmd_tag, '', q, coalesce(cmd_path, ''), coalesce(cmd_role, ''), 'stop', 'pgsprint could not capture it: ' || why
					FROM ` + c.table + ` WHERE xid = pg_catalog.txid_current();
			EXCEPTION WHEN OTHERS THEN
				RAISE WARNING 'pgsprint: this statement is not captured for the follow (%); the follow''s finish will find the difference', why;
			END;
		END;
		END
		$body$`,
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
			IF cmd ~* '^\s*(CREATE\s+(UNIQUE\s+)?INDEX|DROP\s+INDEX|REINDEX\s+\w+)\s+CONCURRENTLY' THEN
				cmd := pg_catalog.regexp_replace(cmd, '\mCONCURRENTLY\M', '', 'i');
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
	selected, err := f.Selected("c", "n")
	if err != nil {
		return err
	}
	noData, err := f.DataExcluded("c", "n")
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
	c := captureNames(slot)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT pg_catalog.to_regclass($1) IS NOT NULL
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = ANY ($2))
		OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = $3 AND p.proname = ANY ($2))`,
		c.table, c.raw, captureSchema).Scan(&exists); err != nil {
		return fmt.Errorf("look for the DDL capture: %w", err)
	}
	if !exists {
		return nil
	}
	var stmts []string
	for _, t := range c.triggers {
		stmts = append(stmts, "DROP EVENT TRIGGER IF EXISTS "+t)
	}
	stmts = append(stmts, "DROP TABLE IF EXISTS "+c.table,
		"DROP FUNCTION IF EXISTS "+c.hook+"()",
		"DROP FUNCTION IF EXISTS "+c.record+"(text, text, text, text)",
		"DROP FUNCTION IF EXISTS "+c.apply+"()")
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("remove the DDL capture (%s): %w", q, err)
		}
	}
	_, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pg.Ident(captureSchema))
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

// canCapture reports whether DDL can be captured: event triggers need a
// superuser on the source, and the target holds the same objects.
func canCapture(ctx context.Context, sourceSuper bool, dst *pgx.ConnConfig) (bool, error) {
	if !sourceSuper {
		return false, nil
	}
	conn, err := pg.Connect(ctx, dst)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
		return false, fmt.Errorf("read the target role's attributes: %w", err)
	}
	return super, nil
}
