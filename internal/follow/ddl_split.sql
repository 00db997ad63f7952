-- The statement lexer of the DDL capture (ddl.go): it splits a query
-- string, as the server received it, into its statements, so that the
-- capture replays a statement only when it is alone in its string, and
-- names what in it would not replay exactly. It works on the bytes
-- (every server encoding keeps ASCII as ASCII), so that a long text is
-- read once: get_byte is O(1), a text's substr is not.
--
-- Skipped between tokens: whitespace, -- comments, /* comments */
-- (nested, as PostgreSQL nests them). Tokens: 'strings' (E'...' with
-- backslash escapes, and every string when std, standard_conforming_strings,
-- is off), "quoted identifiers", $tag$ dollar quotes $tag$, words, and
-- any other byte. A ; outside them ends a statement.
--
-- For each statement with a token it returns:
--   stmt    its text from its first token to its last (no leading comment,
--           no ;);
--   words   its first 256 bare words, upper case (quoted names, strings
--           and comments are not words);
--   wpos    each word's byte offset in stmt;
--   ucalls  after a bare USING: the functions it calls (a word before a
--           "(", not a type's modifier after :: or AS) and the SQL value
--           keywords (CURRENT_TIMESTAMP...), lower case;
--   special its string constants 'now', 'today', 'tomorrow', 'yesterday',
--           which PostgreSQL turns into the time the statement runs.
CREATE FUNCTION {{split}}(q text, std boolean)
RETURNS TABLE (stmt text, words text[], wpos int[], ucalls text[], special text[])
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $body$
DECLARE
	enc name := pg_catalog.getdatabaseencoding();
	b bytea := pg_catalog.convert_to(q, pg_catalog.getdatabaseencoding());
	nb int := pg_catalog.length(b);
	i int := 0;
	j int;
	k int;
	ch int;
	nx int;
	depth int;
	s int;             -- the statement's first byte, null before its first token
	e int;             -- the byte after its last token
	w text;
	dq bytea;
	lit text;
	eprefix boolean := false; -- the previous token was the E of E'...'
	esc boolean;
	using_ boolean := false;  -- a bare USING came before, in this statement
	prevsym int := -1;        -- the previous token's last byte when it was no word
	prevw text := '';         -- the previous word
BEGIN
	words := '{}'; wpos := '{}'; ucalls := '{}'; special := '{}';
	WHILE i <= nb LOOP
		ch := CASE WHEN i = nb THEN 59 ELSE pg_catalog.get_byte(b, i) END; -- the end ends a statement as ; does
		nx := CASE WHEN i + 1 < nb THEN pg_catalog.get_byte(b, i + 1) ELSE -1 END;
		IF ch = 45 AND nx = 45 THEN -- --
			j := pg_catalog.position(pg_catalog.substring(b, i + 3), '\x0a'::bytea);
			i := CASE WHEN j = 0 THEN nb ELSE i + 2 + j END;
		ELSIF ch = 47 AND nx = 42 THEN -- /*, nested
			depth := 1;
			i := i + 2;
			WHILE depth > 0 AND i < nb LOOP
				j := pg_catalog.position(pg_catalog.substring(b, i + 1), '\x2a2f'::bytea);
				k := pg_catalog.position(pg_catalog.substring(b, i + 1), '\x2f2a'::bytea);
				IF j = 0 THEN
					i := nb;
				ELSIF k > 0 AND k < j THEN
					depth := depth + 1;
					i := i + k + 1;
				ELSE
					depth := depth - 1;
					i := i + j + 1;
				END IF;
			END LOOP;
		ELSIF ch IN (9, 10, 11, 12, 13, 32) THEN
			i := i + 1;
		ELSIF ch = 59 THEN -- ;
			IF s IS NOT NULL THEN
				stmt := pg_catalog.convert_from(pg_catalog.substring(b, s + 1, e - s), enc);
				RETURN NEXT;
			END IF;
			s := NULL;
			words := '{}'; wpos := '{}'; ucalls := '{}'; special := '{}';
			using_ := false; prevsym := -1; prevw := ''; eprefix := false;
			i := i + 1;
		ELSE
			s := coalesce(s, i);
			IF ch = 39 THEN -- 'string'
				esc := eprefix OR std IS NOT TRUE;
				IF esc THEN
					k := i + 1;
					WHILE k < nb LOOP
						j := pg_catalog.get_byte(b, k);
						IF j = 92 THEN -- \
							k := k + 2;
						ELSIF j = 39 THEN
							IF k + 1 < nb AND pg_catalog.get_byte(b, k + 1) = 39 THEN
								k := k + 2;
							ELSE
								EXIT;
							END IF;
						ELSE
							k := k + 1;
						END IF;
					END LOOP;
				ELSE -- '' inside reads as two strings side by side: the same for this
					j := pg_catalog.position(pg_catalog.substring(b, i + 2), '\x27'::bytea);
					k := CASE WHEN j = 0 THEN nb ELSE i + j END;
				END IF;
				IF k - i - 1 BETWEEN 1 AND 24 AND k < nb THEN
					lit := pg_catalog.lower(pg_catalog.btrim(pg_catalog.convert_from(pg_catalog.substring(b, i + 2, k - i - 1), enc), E' \t\n\r'));
					IF lit IN ('now', 'today', 'tomorrow', 'yesterday') THEN
						special := special || lit;
					END IF;
				END IF;
				i := least(k + 1, nb);
				e := i;
				prevsym := 39;
				prevw := '';
				eprefix := false;
			ELSIF ch = 34 THEN -- "identifier"
				j := pg_catalog.position(pg_catalog.substring(b, i + 2), '\x22'::bytea);
				i := CASE WHEN j = 0 THEN nb ELSE i + j + 1 END;
				e := i;
				prevsym := 34;
				prevw := '';
				eprefix := false;
			ELSIF ch = 36 THEN -- $tag$ (a word never ends at a $: it takes it)
				k := i + 1;
				WHILE k < nb AND (pg_catalog.get_byte(b, k) BETWEEN 65 AND 90 OR pg_catalog.get_byte(b, k) BETWEEN 97 AND 122
					OR pg_catalog.get_byte(b, k) = 95 OR pg_catalog.get_byte(b, k) >= 128
					OR k > i + 1 AND pg_catalog.get_byte(b, k) BETWEEN 48 AND 57) LOOP
					k := k + 1;
				END LOOP;
				IF k < nb AND pg_catalog.get_byte(b, k) = 36 THEN
					dq := pg_catalog.substring(b, i + 1, k - i + 1);
					j := pg_catalog.position(pg_catalog.substring(b, k + 2), dq);
					i := CASE WHEN j = 0 THEN nb ELSE k + j + pg_catalog.length(dq) END;
				ELSE
					i := i + 1; -- $1
				END IF;
				e := i;
				prevsym := 36;
				prevw := '';
				eprefix := false;
			ELSIF ch BETWEEN 65 AND 90 OR ch BETWEEN 97 AND 122 OR ch = 95 OR ch >= 128 THEN -- a word
				k := i + 1;
				WHILE k < nb AND (pg_catalog.get_byte(b, k) BETWEEN 65 AND 90 OR pg_catalog.get_byte(b, k) BETWEEN 97 AND 122
					OR pg_catalog.get_byte(b, k) BETWEEN 48 AND 57 OR pg_catalog.get_byte(b, k) IN (95, 36) OR pg_catalog.get_byte(b, k) >= 128) LOOP
					k := k + 1;
				END LOOP;
				w := pg_catalog.upper(pg_catalog.convert_from(pg_catalog.substring(b, i + 1, k - i), enc));
				IF pg_catalog.cardinality(words) < 256 THEN
					words := words || w;
					wpos := wpos || (i - s);
				END IF;
				IF using_ AND pg_catalog.cardinality(ucalls) < 256 THEN
					j := k;
					WHILE j < nb AND pg_catalog.get_byte(b, j) IN (9, 10, 11, 12, 13, 32) LOOP
						j := j + 1;
					END LOOP;
					IF w IN ('CURRENT_DATE', 'CURRENT_TIME', 'CURRENT_TIMESTAMP', 'LOCALTIME', 'LOCALTIMESTAMP', 'CURRENT_USER',
						'CURRENT_ROLE', 'SESSION_USER', 'USER', 'SYSTEM_USER', 'CURRENT_CATALOG', 'CURRENT_SCHEMA')
						OR j < nb AND pg_catalog.get_byte(b, j) = 40 AND prevsym <> 58 AND prevw <> 'AS' THEN
						ucalls := ucalls || pg_catalog.lower(w);
					END IF;
				END IF;
				using_ := using_ OR w = 'USING';
				eprefix := w = 'E' AND k < nb AND pg_catalog.get_byte(b, k) = 39;
				prevw := w;
				prevsym := -1;
				i := k;
				e := i;
			ELSE
				prevsym := ch;
				prevw := '';
				eprefix := false;
				i := i + 1;
				e := i;
			END IF;
		END IF;
	END LOOP;
END
$body$
