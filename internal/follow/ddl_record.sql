-- The DDL capture's recording function (ddl.go), called by the event
-- triggers on the source: it records each DDL statement for the target
-- to replay, or as a stop with the reason it would not replay exactly.
-- The statement's text is the top-level query (current_query()),
-- replayed only when it is that one statement alone in its query string
-- ({{split}} splits it), without CONCURRENTLY (the target runs it in the
-- apply worker's transaction) and a DROP INDEX with IF EXISTS (an index
-- a failed CREATE INDEX CONCURRENTLY left INVALID on the source was never
-- created on the target).
CREATE FUNCTION {{record}}(ev text, cmd_tag text, cmd_path text, cmd_role text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $body$
DECLARE
	q text := pg_catalog.current_query();
	cmd text;
	act text := 'apply';
	why text := '';
	obj text;
	tmp boolean;
	own boolean;
	r record;
	st record;
	nst int := 0;
	words text[];
	wpos int[];
	k int;
	cols text;
	fns text;
	cur xid := (pg_catalog.txid_current() % 4294967296)::text::xid;
	enc name := pg_catalog.getdatabaseencoding();
BEGIN
-- A failure here must not fail the user's statement: it becomes a
-- stop, and if even that cannot be written, a warning.
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = {{pub}}) THEN
		RETURN; -- the target's copy, or a publication already dropped
	END IF;
	IF cmd_tag ~ 'PUBLICATION|SUBSCRIPTION' THEN
		RETURN;
	END IF;
	-- pgsprint's own statements on the source (finish's handover mark):
	-- never the user's DDL, never replayed.
	IF pg_catalog.current_setting('pgsprint.capture', true) = 'off' THEN
		RETURN;
	END IF;
	IF ev = 'ddl_command_end' THEN
		IF cmd_tag LIKE 'DROP %' THEN
			RETURN; -- recorded at sql_drop
		END IF;
		-- The commands of an extension's script: replayed by its CREATE
		-- or ALTER EXTENSION, recorded once, at its own firing.
		SELECT pg_catalog.string_agg(DISTINCT d.object_identity, ', '), pg_catalog.bool_or(d.schema_name LIKE 'pg\_temp%'),
			pg_catalog.bool_and(d.schema_name = {{schema}}) OR pg_catalog.bool_or(d.in_extension)
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
			pg_catalog.bool_and(d.schema_name = {{schema}})
			INTO obj, tmp, own FROM pg_catalog.pg_event_trigger_dropped_objects() d WHERE d.original;
	ELSIF ev = 'table_rewrite' THEN
		obj := pg_catalog.pg_event_trigger_table_rewrite_oid()::pg_catalog.regclass::text;
		IF pg_catalog.pg_event_trigger_table_rewrite_reason() & 2 = 0 THEN
			RETURN; -- a rewrite the target does the same way
		END IF;
		-- A new column filled row by row: by a volatile default, an
		-- identity or a serial (a stored generated column is immutable,
		-- a domain's constraints only check: the same on the target).
		-- New: its catalog row is this transaction's, and the statement
		-- names it.
		SELECT pg_catalog.string_agg(pg_catalog.format('%s.%I', a.attrelid::pg_catalog.regclass, a.attname), ', ') INTO cols
		FROM pg_catalog.pg_attribute a
		LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
		WHERE a.attrelid = pg_catalog.pg_event_trigger_table_rewrite_oid() AND a.attnum > 0 AND NOT a.attisdropped
		AND a.xmin = cur AND pg_catalog.strpos(pg_catalog.lower(q), pg_catalog.lower(a.attname)) > 0
		AND (a.attidentity <> '' OR a.attgenerated = '' AND coalesce(ad.adbin::text, (
			WITH RECURSIVE t(typ, def) AS (SELECT a.atttypid, NULL::text COLLATE "C"
				UNION ALL SELECT y.typbasetype, y.typdefaultbin::text FROM t JOIN pg_catalog.pg_type y ON y.oid = t.typ
				WHERE y.typtype = 'd' AND t.def IS NULL)
			SELECT t.def FROM t WHERE t.def IS NOT NULL LIMIT 1)) ~ '\{(FUNCEXPR|SQLVALUEFUNCTION|NEXTVALUEEXPR)');
		IF cols IS NULL THEN
			RETURN;
		END IF;
		act := 'stop';
		why := 'it fills ' || cols || ' row by row (a volatile default, an identity or serial column): the target would compute other values';
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
		FOR r IN SELECT * FROM {{split}}(q, pg_catalog.current_setting('standard_conforming_strings')::boolean) LOOP
			nst := nst + 1;
			IF nst = 1 THEN
				st := r;
				words := r.words;
				wpos := r.wpos;
			END IF;
		END LOOP;
		IF nst <> 1 OR words[1] IS DISTINCT FROM pg_catalog.split_part(cmd_tag, ' ', 1) THEN
			act := 'stop';
			why := 'it runs inside a function, procedure or DO block, or in one query string with other statements: pgsprint replays a statement only alone';
		ELSIF cmd_tag = 'ALTER TABLE' AND 'DETACH' = ANY (words) AND ('CONCURRENTLY' = ANY (words) OR 'FINALIZE' = ANY (words)) THEN
			act := 'stop';
			why := 'DETACH PARTITION CONCURRENTLY runs in two transactions and adds a CHECK constraint: the target cannot replay it in its apply worker''s transaction (detach without CONCURRENTLY)';
		ELSIF cmd_tag <> 'COMMENT' AND pg_catalog.cardinality(st.special) > 0 THEN
			act := 'stop';
			why := 'it holds the constant ''' || st.special[1] || ''', which PostgreSQL turns into the time the statement runs: the target would get another time';
		ELSIF cmd_tag = 'ALTER TABLE' AND 'USING' = ANY (words) THEN
			-- A function none of whose forms is immutable (random(),
			-- now()), or a SQL value keyword (CURRENT_TIMESTAMP).
			SELECT pg_catalog.string_agg(DISTINCT c, ', ') INTO fns FROM pg_catalog.unnest(st.ucalls) c
			WHERE pg_catalog.upper(c) = ANY (ARRAY['CURRENT_DATE', 'CURRENT_TIME', 'CURRENT_TIMESTAMP', 'LOCALTIME', 'LOCALTIMESTAMP', 'CURRENT_USER',
				'CURRENT_ROLE', 'SESSION_USER', 'USER', 'SYSTEM_USER', 'CURRENT_CATALOG', 'CURRENT_SCHEMA'])
			OR EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = c)
				AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = c AND p.provolatile = 'i');
			IF fns IS NOT NULL THEN
				act := 'stop';
				why := 'its USING expression calls ' || fns || ', not immutable: the target would compute other values';
			END IF;
		END IF;
		IF act = 'apply' THEN
			cmd := st.stmt;
			IF cmd_tag IN ('CREATE INDEX', 'DROP INDEX', 'REINDEX') THEN
				k := pg_catalog.array_position(words[1:6], 'CONCURRENTLY');
				IF k IS NOT NULL THEN
					cmd := pg_catalog.convert_from(pg_catalog.overlay(pg_catalog.convert_to(cmd, enc), ''::bytea, wpos[k] + 1, 12), enc);
					words := words[1:k - 1] || words[k + 1:];
					wpos := wpos[1:k - 1] || wpos[k + 1:];
				END IF;
			END IF;
			IF cmd_tag = 'DROP INDEX' AND words[3] IS DISTINCT FROM 'IF' THEN
				cmd := pg_catalog.convert_from(pg_catalog.overlay(pg_catalog.convert_to(cmd, enc), '\x20494620455849535453'::bytea, wpos[2] + 6, 0), enc);
			END IF;
		END IF;
	END IF;
	IF act = 'apply' AND ev = 'ddl_command_end' AND cmd_tag = 'ALTER TABLE' THEN
		-- A new column's default evaluated once (now(), current_user),
		-- its own or its domain's: the target would evaluate it again,
		-- to another value. Only a SQL value keyword or a call of a
		-- function that is not immutable differs there: a constant cast
		-- by an immutable function (numeric(10,2) DEFAULT 1.5) is the
		-- same on the target, and replayed.
		SELECT pg_catalog.string_agg(pg_catalog.format('%s.%I', a.attrelid::pg_catalog.regclass, a.attname), ', ') INTO cols
		FROM pg_catalog.pg_event_trigger_ddl_commands() d
		JOIN pg_catalog.pg_attribute a ON a.attrelid = d.objid AND a.atthasmissing AND NOT a.attisdropped AND a.xmin = cur
		LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
		CROSS JOIN LATERAL (SELECT coalesce(ad.adbin::text, (
			WITH RECURSIVE t(typ, def) AS (SELECT a.atttypid, NULL::text COLLATE "C"
				UNION ALL SELECT y.typbasetype, y.typdefaultbin::text FROM t JOIN pg_catalog.pg_type y ON y.oid = t.typ
				WHERE y.typtype = 'd' AND t.def IS NULL)
			SELECT t.def FROM t WHERE t.def IS NOT NULL LIMIT 1)) AS def) x
		WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
		AND (x.def ~ '\{SQLVALUEFUNCTION' OR EXISTS (
			SELECT 1 FROM pg_catalog.regexp_matches(x.def, ':(?:func|opfunc)id (\d+)', 'g') m
			JOIN pg_catalog.pg_proc p ON p.oid = m[1]::pg_catalog.oid
			WHERE p.provolatile <> 'i'))
		AND pg_catalog.strpos(pg_catalog.lower(q), pg_catalog.lower(a.attname)) > 0;
		IF cols IS NOT NULL THEN
			act := 'stop';
			why := 'the default of ' || cols || ' is evaluated once, when the column is added: the target would evaluate it again, to another value';
		END IF;
	END IF;
	IF ev = 'ddl_command_end' AND NOT (SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = {{pub}}) THEN
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
				WHERE t.pubname = {{pub}} AND t.schemaname = n.nspname AND t.tablename = c.relname)
			AND ({{selected}}) AND NOT ({{noData}})
		LOOP
			EXECUTE pg_catalog.format('ALTER PUBLICATION %I ADD TABLE %s', {{pub}}, r.rel);
		END LOOP;
		PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	END IF;
	INSERT INTO {{table}} SELECT pg_catalog.txid_current(), coalesce(pg_catalog.max(n), 0) + 1,
		cmd_tag, coalesce(obj, ''), CASE WHEN act = 'apply' THEN cmd ELSE q END, coalesce(cmd_path, ''), coalesce(cmd_role, ''), act, why
		FROM {{table}} WHERE xid = pg_catalog.txid_current();
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS why = MESSAGE_TEXT;
	BEGIN
		INSERT INTO {{table}} SELECT pg_catalog.txid_current(), coalesce(pg_catalog.max(n), 0) + 1,
			cmd_tag, '', q, coalesce(cmd_path, ''), coalesce(cmd_role, ''), 'stop', 'pgsprint could not capture it: ' || why
			FROM {{table}} WHERE xid = pg_catalog.txid_current();
	EXCEPTION WHEN OTHERS THEN
		RAISE WARNING 'pgsprint: this statement is not captured for the follow (%); the follow''s finish will find the difference', why;
	END;
END;
END
$body$
