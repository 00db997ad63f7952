-- torture.sql: a deliberately nasty database for pgsprint round-trip tests.
--
-- Load into an EMPTY database as a superuser with
--   psql -X -v ON_ERROR_STOP=1 -f torture.sql
-- (pgtest.LoadTorture does exactly that).
--
-- Rules for editing this file:
--   * Deterministic: two loads (in two databases of one cluster, possibly at
--     the same time) must give identical `pg_dump --schema-only` output and
--     identical pgtest.Fingerprint values. No random(), now(), clock reads,
--     or OIDs picked by the server (large objects get explicit OIDs).
--   * Roles are cluster-wide: create them only through the race-safe DO block.
--   * Keep the total size around 20 MB per database so round trips take
--     seconds.

SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, MDY';
SET IntervalStyle = 'postgres';
SET extra_float_digits = 1;

------------------------------------------------------------------------------
-- What this server has. The contrib extensions (pg_trgm, hstore, btree_gist)
-- are missing from some builds (the PyPI wheels of PostgreSQL 13 and 16);
-- multiranges and SQL-standard function bodies need PostgreSQL 14. Where
-- something is missing, a plain stand-in of the same name takes its place
-- and an \echo says so, so that the rest of the file and every test that
-- compares two loads stay the same on every version.
------------------------------------------------------------------------------
SELECT count(*) = 3 AS torture_contrib FROM pg_catalog.pg_available_extensions
    WHERE name IN ('pg_trgm', 'hstore', 'btree_gist') \gset
SELECT current_setting('server_version_num')::int >= 140000 AS torture_pg14 \gset

------------------------------------------------------------------------------
-- Roles (cluster-wide; several databases may load this concurrently, so a
-- lost race surfaces as unique_violation rather than duplicate_object).
------------------------------------------------------------------------------
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['pgtest_owner', 'pgtest_reader', 'pgtest_writer', 'pgtest ünï "role"'] LOOP
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        EXCEPTION WHEN duplicate_object OR unique_violation THEN
            NULL;
        END;
    END LOOP;
END
$$;

------------------------------------------------------------------------------
-- Schemas with odd names, extensions
------------------------------------------------------------------------------
CREATE SCHEMA app;
CREATE SCHEMA "MixedCase";
CREATE SCHEMA "ünï côdé";
CREATE SCHEMA "has ""quotes"" and spaces";
CREATE SCHEMA "dot.ted" AUTHORIZATION pgtest_owner;
CREATE SCHEMA ext;

COMMENT ON SCHEMA app IS 'main torture schema';
COMMENT ON SCHEMA "ünï côdé" IS 'schema comment with ''quotes'', ünïcödé and a
newline';

\if :torture_contrib
CREATE EXTENSION pg_trgm;
CREATE EXTENSION hstore;
CREATE EXTENSION btree_gist SCHEMA ext;
\else
\echo 'torture.sql: no pg_trgm/hstore/btree_gist here: hstore is a text domain, trigram indexes are btree, the exclusion constraint uses int4range'
CREATE DOMAIN public.hstore AS text;
CREATE FUNCTION public.hstore(text[], text[]) RETURNS public.hstore LANGUAGE sql IMMUTABLE
    AS $$ SELECT array_to_string($1, ',') || '=>' || array_to_string($2, ',', 'NULL') $$;
CREATE FUNCTION public.hstore(text, text) RETURNS public.hstore LANGUAGE sql IMMUTABLE
    AS $$ SELECT $1 || '=>' || coalesce($2, 'NULL') $$;
\endif
\set torture_numeric_inf Infinity
-- A "char" holding the first byte of a two-byte character: PostgreSQL < 15
-- prints that byte raw, which is not UTF-8, so no dump of it can be loaded
-- anywhere (pg_dump's neither); 15 and later print it as an octal escape.
\set torture_char_hi 'é'
SELECT current_setting('server_version_num')::int < 150000 AS torture_pre15 \gset
\if :torture_pre15
\echo 'torture.sql: PostgreSQL < 15: the non-ASCII "char" value is ASCII instead'
\set torture_char_hi 'e'
\endif
\if :torture_pg14
\else
\echo 'torture.sql: PostgreSQL < 14: int4multirange is a text domain, SQL-standard function bodies are strings, numeric has no Infinity (NaN instead)'
\set torture_numeric_inf NaN
CREATE DOMAIN public.int4multirange AS text;
CREATE FUNCTION public.int4multirange(VARIADIC int4range[]) RETURNS public.int4multirange LANGUAGE sql IMMUTABLE
    AS $$ SELECT '{' || array_to_string($1, ',') || '}' $$;
\endif

------------------------------------------------------------------------------
-- Types: enum (with values added out of order), domains, composite, range
------------------------------------------------------------------------------
CREATE TYPE app.mood AS ENUM ('sad', 'ok', 'happy');
ALTER TYPE app.mood ADD VALUE 'meh' BEFORE 'ok';
ALTER TYPE app.mood ADD VALUE 'ecstatic ü' AFTER 'happy';
COMMENT ON TYPE app.mood IS 'enum whose OID order differs from its sort order';

CREATE DOMAIN app.posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN app.short_text AS text COLLATE "C" DEFAULT 'dflt' NOT NULL
    CONSTRAINT short_text_len CHECK (length(VALUE) <= 40);
CREATE DOMAIN app.int_list AS integer[] CHECK (array_position(VALUE, 0) IS NULL);

CREATE TYPE app.point3 AS (x double precision, y double precision, z double precision, label text);
CREATE TYPE app.floatrange AS RANGE (subtype = double precision, subtype_diff = float8mi);
REVOKE USAGE ON TYPE app.point3 FROM PUBLIC;
GRANT USAGE ON TYPE app.point3 TO pgtest_reader;

------------------------------------------------------------------------------
-- Functions (sql, plpgsql, procedure, aggregate, odd names)
------------------------------------------------------------------------------
CREATE FUNCTION app.add(a integer, b integer DEFAULT 1) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT a + b';
COMMENT ON FUNCTION app.add(integer, integer) IS 'adds; used by a column default';

CREATE FUNCTION app.fmt_name(n text) RETURNS text
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF n IS NULL THEN
        RETURN '<none>';
    END IF;
    RETURN initcap(trim(n));
END
$$;
REVOKE EXECUTE ON FUNCTION app.fmt_name(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION app.fmt_name(text) TO pgtest_reader;

CREATE FUNCTION app.split_pair(s text, OUT l text, OUT r text)
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT split_part(s, '=', 1), split_part(s, '=', 2) $$;

\if :torture_pg14
CREATE FUNCTION app.series(n integer) RETURNS SETOF integer
    LANGUAGE sql IMMUTABLE
BEGIN ATOMIC
    SELECT generate_series(1, n);
END;
\else
CREATE FUNCTION app.series(n integer) RETURNS SETOF integer
    LANGUAGE sql IMMUTABLE
    AS 'SELECT generate_series(1, n)';
\endif

CREATE FUNCTION "ünï côdé"."fünc ""q"""(x integer) RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $$ SELECT x * 2 $$;
COMMENT ON FUNCTION "ünï côdé"."fünc ""q"""(integer) IS 'function with an odd name';

CREATE PROCEDURE app.noop(IN msg text)
    LANGUAGE plpgsql
    AS $$ BEGIN RAISE DEBUG '%', msg; END $$;

CREATE AGGREGATE app.concat_agg(text) (SFUNC = textcat, STYPE = text, INITCOND = '');

------------------------------------------------------------------------------
-- Every common column type, with edge values
------------------------------------------------------------------------------
CREATE TABLE app.all_types (
    id          integer PRIMARY KEY,
    b           boolean,
    i2          smallint,
    i4          integer,
    i8          bigint,
    n           numeric,
    n_fixed     numeric(12, 4),
    f4          real,
    f8          double precision,
    ts          timestamp without time zone,
    tstz        timestamp with time zone,
    d           date,
    t           time without time zone,
    ttz         time with time zone,
    iv          interval,
    txt         text,
    txt_c       text COLLATE "C",
    vc          varchar(50),
    ch          char(5),
    qc          "char",
    by          bytea,
    js          json,
    jb          jsonb,
    arr_i       integer[],
    arr_t       text[],
    arr_2d      integer[][],
    r_i         int4range,
    r_n         numrange,
    r_ts        tstzrange,
    r_d         daterange,
    mr_i        int4multirange,
    r_f         app.floatrange,
    mood        app.mood,
    moods       app.mood[],
    pos         app.posint,
    st          app.short_text,
    il          app.int_list,
    pt          app.point3,
    pts         app.point3[],
    u           uuid,
    ip          inet,
    net         cidr,
    mac         macaddr,
    bits        bit varying(64),
    bits_fixed  bit(4),
    tsv         tsvector,
    geo         point,
    hs          hstore
);
COMMENT ON TABLE app.all_types IS 'one column of every common type';
COMMENT ON COLUMN app.all_types.by IS 'bytea; row 3 holds all 256 byte values';

-- Hand-written edge rows.
INSERT INTO app.all_types (id, st) VALUES (1, 'all other columns NULL');

INSERT INTO app.all_types VALUES (
    2, false, 0, 0, 0, 0, 0, 0, 0,
    '2000-01-01 00:00:00', '2000-01-01 00:00:00+00', '2000-01-01', '00:00:00', '00:00:00+00', '0 seconds',
    '', '', '', '', '',
    ''::bytea, '""', '{}', '{}', '{}', '{}',
    'empty', 'empty', 'empty', 'empty', '{}', 'empty',
    'sad', '{}', 1, '', '{}',
    ROW(NULL, NULL, NULL, NULL), '{}',
    '00000000-0000-0000-0000-000000000000', '0.0.0.0', '0.0.0.0/0', '00:00:00:00:00:00', B'', B'0000',
    '', '(0,0)', ''
);

INSERT INTO app.all_types VALUES (
    3, true, 32767, 2147483647, 9223372036854775807,
    (repeat('9', 3000) || '.' || repeat('0123456789', 100))::numeric,
    99999999.9999, 3.4028235e38, 1.7976931348623157e308,
    '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00', '5874897-12-31', '24:00:00', '24:00:00-15:59',
    '178000000 years 11 mons 30 days 23:59:59.999999',
    E'tab\there\nnewline\r\ncrlf\\backslash\n\\.\nafter a line that is exactly backslash-dot',
    E'\\.', repeat('x', 50), 'abcde', 'z',
    (SELECT decode(string_agg(lpad(to_hex(g), 2, '0'), '' ORDER BY g), 'hex') FROM generate_series(0, 255) g),
    '{"dup": 1,  "dup" : 2, "ü": "\u00fc", "nested": {"a": [1, 2.50, null, true]}}',
    '{"nested": {"deep": [1, 2.50, null, "x\"y", {"k": "ü 🐘"}]}, "big": 1e100, "empty": {}}',
    '[-2:0]={7,8,9}',
    ARRAY['a', NULL, '', 'NULL', 'with "quote"', E'back\\slash', 'comma,brace}{', ' space ', E'tab\tnl\n'],
    '{{1,2,3},{4,NULL,6}}',
    '[1,10)', '(1.5,)', '[2020-01-01 00:00:00+00,infinity)', '[-infinity,2020-01-01)', '{[1,3),[5,7)}', '[-Infinity,0.5]',
    'ecstatic ü', '{sad,meh,NULL,"ecstatic ü"}', 2147483647, repeat('y', 40), '{1,2,NULL}',
    ROW(1.5, -2, 'NaN', 'label "q", (comma) \ backslash'),
    ARRAY[ROW(1, 2, 3, 'a')::app.point3, NULL, ROW(NULL, NULL, NULL, '')::app.point3],
    'ffffffff-ffff-ffff-ffff-ffffffffffff', '::ffff:1.2.3.4/128', '2001:db8::/32', '08:00:2b:01:02:03',
    B'1010101010101010101010101010101010101010101010101010101010101010', B'1111',
    'a:1A fat:2B,4C cat:5D ''quoted lexeme'':3 ü:7',
    '(1.5,-2)',
    '"a"=>"1", "b"=>NULL, "ü k"=>"\"q\"", ""=>""'
);

INSERT INTO app.all_types VALUES (
    4, NULL, -32768, -2147483648, -9223372036854775808,
    'NaN', -99999999.9999, 'NaN', 'NaN',
    'infinity', 'infinity', 'infinity', '00:00:00.000001', '00:00:00.000001+15:59', '-178000000 years',
    'NULL', E'\\N', 'NULL', 'N', '\',
    '\x00'::bytea, 'null', 'null', '{NULL}', '{NULL}', '{{NULL}}',
    '(,)', '(,)', '(,)', '(,)', '{(,)}', '(,)',
    'meh', '{NULL}', 42, 'x', NULL,
    ROW(NULL, NULL, NULL, NULL), ARRAY[NULL]::app.point3[],
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '255.255.255.255', '10.0.0.0/8', 'ff:ff:ff:ff:ff:ff', B'1', B'0001',
    to_tsvector('simple', 'The quick brown fox; ünï côdé!'), '(NaN,Infinity)', '"NULL"=>"null"'
);

INSERT INTO app.all_types VALUES (
    5, true, 1, 1, 1,
    :'torture_numeric_inf', 0.0001, '-0', '-0',
    '-infinity', '-infinity', '-infinity', '12:34:56.789', '12:34:56.789+05:30', '1 mon -1 days +00:00:00.000001',
    E'unicode: 🐘 ünï côdé \u00e9 e\u0301 ﬁ \u202ertl\u202c zero-width\u200bspace',
    E'\r', E'line\n', 'ü', :'torture_char_hi',
    '\xdeadbeef'::bytea, '[1, "two", {"3": [4]}]', '[1, "two", {"3": [4]}]', '{{{1}}}', '{"{}","[]","\\"}', '{}',
    '[-2147483648,2147483647)', '[-1e-50,1e50]', '(2020-01-01 00:00:00+00,2020-01-01 00:00:01+00]', '[2000-02-29,2000-03-01]',
    '{[-10,-5), [0,1), [100,)}', '[1e-300,1e300)',
    'happy', '{happy,happy}', 7, 'seven', '{7,7,7}',
    ROW('Infinity', '-Infinity', '-0', E'new\nline'), ARRAY[ROW(0, 0, 0, '')::app.point3],
    '123e4567-e89b-12d3-a456-426614174000', '2001:db8::ff00:42:8329', '192.168.0.0/16', '01:23:45:67:89:ab', B'0', B'1000',
    ''::tsvector, '(1e308,-1e-308)', '"k"=>"v"'
);

INSERT INTO app.all_types VALUES (
    6, false, -1, -1, -1,
    -('0.' || repeat('0', 5000) || '1')::numeric, -0.0001, 1e-45, 5e-324,
    '4713-01-01 00:00:00 BC', '4713-01-01 00:00:00+00 BC', '4713-01-01 BC', '23:59:59.999999', '23:59:59.999999-15:59', '-1 days -00:00:00.000001',
    E'\\', E'\\\\', E'\\.', E'\\.', '.',
    '\x5c2e0a'::bytea, '  {"ws"  :  "kept"  }  ', '  {"ws"  :  "normalized"  }  ', NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, default, NULL,
    NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL
);

-- Generated bulk rows.
INSERT INTO app.all_types
SELECT g,
       g % 3 = 0,
       (g % 32000)::smallint,
       (g * 7919) % 1000003,
       g::bigint * 1000000007,
       (g * 3.14159265358979323846264338327950288)::numeric,
       round((g / 7.0)::numeric, 4),
       (g / 3.0)::real,
       g / 7.0::double precision,
       '2020-01-01 00:00:00'::timestamp + g * interval '1 hour 7 seconds',
       '2020-01-01 00:00:00+00'::timestamptz + g * interval '13 minutes 0.125 seconds',
       '2020-01-01'::date + g,
       '00:00:00'::time + g * interval '17 seconds',
       ('00:00:00'::time + g * interval '17 seconds')::timetz,
       make_interval(months => g % 13, days => g % 31, secs => g * 1.5),
       md5(g::text) || E'\t' || g || CASE WHEN g % 10 = 0 THEN E'\n\\.\n' ELSE '' END,
       md5(g::text || 'c'),
       left(md5(g::text), g % 50),
       left(md5(g::text), 3),
       chr(65 + g % 26),
       decode(md5(g::text), 'hex'),
       json_build_object('i', g, 'h', md5(g::text)),
       jsonb_build_object('i', g, 'h', md5(g::text), 'arr', jsonb_build_array(g, g * 2, NULL), 'f', g / 8.0),
       ARRAY[g, g + 1, NULL],
       ARRAY[md5(g::text), NULL, ''],
       ARRAY[ARRAY[g, g], ARRAY[g, NULL]],
       int4range(g, g + 10),
       numrange(g / 3.0, g / 2.0 + 1),
       tstzrange('2020-01-01 00:00:00+00'::timestamptz + g * interval '1 minute',
                 '2020-01-01 00:00:00+00'::timestamptz + g * interval '2 minutes' + interval '1 second'),
       daterange('2020-01-01'::date + g, '2020-01-01'::date + g + g % 5 + 1),
       int4multirange(int4range(g, g + 2), int4range(g + 5, g + 7)),
       app.floatrange(g / 3.0, g / 2.0 + 1),
       (enum_range(NULL::app.mood))[1 + g % 5],
       ARRAY[(enum_range(NULL::app.mood))[1 + g % 5]],
       g,
       'st' || g,
       ARRAY[g, g + 1],
       ROW(g, g / 2.0, g / 3.0, 'p' || g)::app.point3,
       ARRAY[ROW(g, 0, 0, NULL)::app.point3],
       md5(g::text)::uuid,
       ('10.' || g % 256 || '.' || (g / 256) % 256 || '.1')::inet,
       ('10.' || g % 256 || '.0.0/16')::cidr,
       ('08:00:2b:' || lpad(to_hex(g % 256), 2, '0') || ':' || lpad(to_hex((g / 256) % 256), 2, '0') || ':03')::macaddr,
       (g % 65536)::bit(16)::bit varying(64),
       (g % 16)::bit(4),
       to_tsvector('simple', 'word' || g || ' common ' || md5(g::text)),
       point(g, -g / 3.0),
       hstore(ARRAY['k' || g, 'v'], ARRAY[md5(g::text), NULL])
FROM generate_series(100, 2099) g;

\if :torture_contrib
CREATE INDEX all_types_hs_idx ON app.all_types USING gin (hs);
\else
CREATE INDEX all_types_hs_idx ON app.all_types (hs);
\endif
CREATE INDEX all_types_jb_idx ON app.all_types USING gin (jb jsonb_path_ops);
\if :torture_contrib
CREATE INDEX all_types_txt_trgm_idx ON app.all_types USING gin (txt gin_trgm_ops);
\else
CREATE INDEX all_types_txt_trgm_idx ON app.all_types (md5(txt));
\endif
CREATE INDEX all_types_tsv_idx ON app.all_types USING gin (tsv);

------------------------------------------------------------------------------
-- TOAST: values larger than an archive block (1 MiB) in every COPY format:
-- incompressible-ish text, a bytea, and a highly compressible value.
------------------------------------------------------------------------------
CREATE TABLE app.blobs (
    id          integer PRIMARY KEY,
    big_text    text,
    big_bytea   bytea,
    note        text
);
ALTER TABLE app.blobs ALTER COLUMN big_bytea SET STORAGE EXTERNAL;

INSERT INTO app.blobs (id, big_text, note)
SELECT 1, string_agg(md5(g::text), '' ORDER BY g), '1.3 MB of md5 hex'
FROM generate_series(1, 40000) g;

INSERT INTO app.blobs (id, big_bytea, note)
SELECT 2, decode(string_agg(md5('b' || g), '' ORDER BY g), 'hex'), '1.1 MB of md5 bytes'
FROM generate_series(1, 70000) g;

INSERT INTO app.blobs VALUES (3, repeat(E'pgsprint \\. \n', 100000), NULL, '1.3 MB that compresses well');
INSERT INTO app.blobs VALUES (4, NULL, NULL, NULL);
INSERT INTO app.blobs VALUES (5, '', ''::bytea, '');

------------------------------------------------------------------------------
-- Odd-named tables and columns
------------------------------------------------------------------------------
CREATE TABLE "MixedCase"."MixedTable" (
    "Id"        integer PRIMARY KEY,
    "CamelCol"  text,
    "UPPER"     integer,
    lower       text
);
INSERT INTO "MixedCase"."MixedTable"
SELECT g, 'Camel' || g, g * 2, CASE WHEN g % 7 = 0 THEN NULL ELSE lower(md5(g::text)) END
FROM generate_series(1, 1000) g;

CREATE TABLE "ünï côdé"."tâblé ñame" (
    "çolümn 1"              text,
    "col ""with"" quotes"   integer,
    "select"                text,
    "from"                  integer,
    "oid"                   integer,
    "t"                     text,
    "r"                     text,
    "🐘"                    text
);
COMMENT ON TABLE "ünï côdé"."tâblé ñame" IS 'no primary key, reserved-word and alias-like column names';
COMMENT ON COLUMN "ünï côdé"."tâblé ñame"."col ""with"" quotes" IS 'column comment ''quoted''';
INSERT INTO "ünï côdé"."tâblé ñame"
SELECT 'çé' || g, g, 'select ' || g, g % 10, g, 't' || g, 'r' || g, repeat('🐘', g % 5)
FROM generate_series(1, 1000) g;
-- Duplicate rows: the fingerprint must count them.
INSERT INTO "ünï côdé"."tâblé ñame" SELECT * FROM "ünï côdé"."tâblé ñame" WHERE "from" = 0;

CREATE TABLE "has ""quotes"" and spaces"."table ""q"" name" (
    "a b"   integer,
    "c,d"   text,
    "e;f"   text,
    "g'h"   text,
    "i\j"   text,
    "k.l"   text
);
INSERT INTO "has ""quotes"" and spaces"."table ""q"" name"
SELECT g, 'c,' || g, 'e;' || g, 'g''' || g, E'i\\' || g, 'k.' || g
FROM generate_series(1, 500) g;

CREATE TABLE "has ""quotes"" and spaces"."line
break" (x integer);
INSERT INTO "has ""quotes"" and spaces"."line
break" VALUES (1), (2), (NULL);

CREATE TABLE "dot.ted"."tab.le" (id integer PRIMARY KEY, "x.y" text);
ALTER TABLE "dot.ted"."tab.le" OWNER TO pgtest_owner;
INSERT INTO "dot.ted"."tab.le" SELECT g, 'x.' || g FROM generate_series(1, 300) g;

CREATE TABLE app.abcdefghijklmnopqrstuvwxyz_abcdefghijklmnopqrstuvwxyz_012345678 (
    abcdefghijklmnopqrstuvwxyz_abcdefghijklmnopqrstuvwxyz_012345678 integer
);
INSERT INTO app.abcdefghijklmnopqrstuvwxyz_abcdefghijklmnopqrstuvwxyz_012345678 VALUES (63);

-- Same name in several schemas, differing only by schema or case.
CREATE TABLE public.dup (v text);
CREATE TABLE app.dup (v text);
CREATE TABLE public."DUP" (v text);
INSERT INTO public.dup VALUES ('public.dup');
INSERT INTO app.dup VALUES ('app.dup');
INSERT INTO public."DUP" VALUES ('public."DUP"');

------------------------------------------------------------------------------
-- Identity, serial and standalone sequences (advanced past their data)
------------------------------------------------------------------------------
CREATE TABLE app.ident (
    id_always   bigint GENERATED ALWAYS AS IDENTITY (START WITH 100 INCREMENT BY 5) PRIMARY KEY,
    id_default  integer GENERATED BY DEFAULT AS IDENTITY,
    ser         serial,
    bser        bigserial,
    note        text DEFAULT app.add(40, 2)::text
);
INSERT INTO app.ident (note) SELECT 'row ' || g FROM generate_series(1, 1500) g;
INSERT INTO app.ident (id_default, ser, note) VALUES (-1, -1, 'explicit values');
INSERT INTO app.ident (id_always, note) OVERRIDING SYSTEM VALUE VALUES (1, 'overriding system value');
SELECT count(nextval(pg_get_serial_sequence('app.ident', 'ser'))) FROM generate_series(1, 10);
SELECT setval(pg_get_serial_sequence('app.ident', 'bser'), 5000, false);

CREATE SEQUENCE app.weird_seq AS integer INCREMENT BY -3 MINVALUE -1000 MAXVALUE 10 START 7 CYCLE;
SELECT count(nextval('app.weird_seq')) FROM generate_series(1, 5);
CREATE SEQUENCE app.unused_seq;
CREATE SEQUENCE "ünï côdé"."séq ""q""" START 1000;
SELECT nextval('"ünï côdé"."séq ""q"""');
GRANT USAGE ON SEQUENCE app.weird_seq TO pgtest_writer;

------------------------------------------------------------------------------
-- Constraints: PK, unique, check, deferrable, exclusion, FKs (self and
-- circular), NOT VALID
------------------------------------------------------------------------------
CREATE TABLE app.customers (
    id          integer PRIMARY KEY,
    email       text NOT NULL UNIQUE,
    name        text NOT NULL CHECK (name <> ''),
    referrer_id integer REFERENCES app.customers (id),
    tags        hstore,
    mood        app.mood DEFAULT 'ok',
    updated_by  text
);
COMMENT ON COLUMN app.customers.referrer_id IS 'self-referencing foreign key';
COMMENT ON CONSTRAINT customers_name_check ON app.customers IS 'names are never empty';

CREATE TABLE app.orders (
    id          integer PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES app.customers (id) ON DELETE CASCADE,
    qty         integer NOT NULL CHECK (qty >= 0),
    price       numeric(10, 2) NOT NULL,
    total       numeric GENERATED ALWAYS AS (qty * price) STORED,
    placed      date
) WITH (fillfactor = 70);
ALTER TABLE app.orders ALTER COLUMN qty SET STATISTICS 500;

CREATE TABLE app.audit_log (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tbl     text NOT NULL,
    op      text NOT NULL,
    n       bigint
);

-- Row trigger (modifies rows) and statement trigger with a transition table.
CREATE FUNCTION app.trg_customers_stamp() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.updated_by := 'trigger:' || TG_OP;
    NEW.name := app.fmt_name(NEW.name);
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION app.trg_customers_stamp() IS 'row trigger: normalizes names';

CREATE FUNCTION app.trg_audit() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO app.audit_log (tbl, op, n)
    SELECT TG_TABLE_NAME, TG_OP, count(*) FROM new_rows;
    RETURN NULL;
END
$$;

CREATE TRIGGER customers_stamp BEFORE INSERT OR UPDATE ON app.customers
    FOR EACH ROW EXECUTE FUNCTION app.trg_customers_stamp();
CREATE TRIGGER orders_audit AFTER INSERT ON app.orders
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION app.trg_audit();
COMMENT ON TRIGGER orders_audit ON app.orders IS 'statement trigger with a transition table';

INSERT INTO app.customers (id, email, name, referrer_id, tags)
SELECT g,
       'user' || g || '@example.com',
       '  customer ' || md5(g::text) || '  ',
       CASE WHEN g > 1 THEN g / 2 END,
       hstore('tier', (g % 3)::text) || hstore('ü', CASE WHEN g % 2 = 0 THEN 'even' END)
FROM generate_series(1, 1000) g;

INSERT INTO app.orders (id, customer_id, qty, price, placed)
SELECT g, 1 + (g * 7) % 1000, g % 20, ((g % 1000) / 10.0)::numeric(10, 2), '2023-01-01'::date + g % 365
FROM generate_series(1, 5000) g;

-- SQL-standard body: depends on app.orders by OID, so it must be dumped after it.
\if :torture_pg14
CREATE FUNCTION app.count_orders() RETURNS bigint
    LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT count(*) FROM app.orders;
END;
\else
CREATE FUNCTION app.count_orders() RETURNS bigint
    LANGUAGE sql STABLE
    AS 'SELECT count(*) FROM app.orders';
\endif

-- A disabled trigger.
CREATE TRIGGER orders_never AFTER UPDATE ON app.orders
    FOR EACH ROW EXECUTE FUNCTION app.trg_customers_stamp();
ALTER TABLE app.orders DISABLE TRIGGER orders_never;

CREATE INDEX orders_big_qty_idx ON app.orders (customer_id) WHERE qty > 10;
CREATE INDEX customers_lower_email_idx ON app.customers (lower(email));
\if :torture_contrib
CREATE INDEX customers_name_trgm_idx ON app.customers USING gist (name gist_trgm_ops);
\else
CREATE INDEX customers_name_trgm_idx ON app.customers (name);
\endif
CREATE INDEX orders_placed_incl_idx ON app.orders (placed) INCLUDE (qty, price);
COMMENT ON INDEX app.orders_big_qty_idx IS 'partial index';
ALTER TABLE app.orders CLUSTER ON orders_placed_incl_idx;
CREATE STATISTICS app.orders_qty_price_stats (dependencies, ndistinct) ON qty, price FROM app.orders;

ALTER TABLE app.orders ADD CONSTRAINT orders_price_not_huge CHECK (price < 1000000) NOT VALID;

-- Exclusion constraint (needs btree_gist for the integer equality).
\if :torture_contrib
CREATE TABLE app.bookings (
    id      integer PRIMARY KEY,
    room    integer NOT NULL,
    during  tsrange NOT NULL,
    EXCLUDE USING gist (room WITH =, during WITH &&)
);
\else
CREATE TABLE app.bookings (
    id      integer PRIMARY KEY,
    room    integer NOT NULL,
    during  tsrange NOT NULL,
    EXCLUDE USING gist (int4range(room, room, '[]') WITH =, during WITH &&)
);
\endif
INSERT INTO app.bookings
SELECT g, g % 10,
       tsrange('2024-01-01'::timestamp + (g / 10) * interval '1 hour',
               '2024-01-01'::timestamp + (g / 10) * interval '1 hour' + interval '59 minutes')
FROM generate_series(1, 1000) g;

-- Deferrable, initially deferred unique constraint.
CREATE TABLE app.slots (
    id  integer PRIMARY KEY,
    pos integer NOT NULL,
    CONSTRAINT slots_pos_key UNIQUE (pos) DEFERRABLE INITIALLY DEFERRED
);
INSERT INTO app.slots SELECT g, g FROM generate_series(1, 1000) g;
BEGIN;
UPDATE app.slots SET pos = pos + 1;
UPDATE app.slots SET pos = 1 WHERE pos = 1001;
COMMIT;

-- Self-referencing hierarchy.
CREATE TABLE app.employees (
    id          integer PRIMARY KEY,
    manager_id  integer REFERENCES app.employees (id) DEFERRABLE,
    name        text NOT NULL
);
INSERT INTO app.employees SELECT g, CASE WHEN g > 1 THEN g / 2 END, 'emp ' || g FROM generate_series(1, 1000) g;

-- Circular foreign keys between two tables.
CREATE TABLE app.circ_a (id integer PRIMARY KEY, b_id integer);
CREATE TABLE app.circ_b (id integer PRIMARY KEY, a_id integer NOT NULL);
INSERT INTO app.circ_a SELECT g, CASE WHEN g % 5 <> 0 THEN g END FROM generate_series(1, 500) g;
INSERT INTO app.circ_b SELECT g, 501 - g FROM generate_series(1, 500) g;
ALTER TABLE app.circ_a ADD CONSTRAINT circ_a_b_fk FOREIGN KEY (b_id) REFERENCES app.circ_b (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE app.circ_b ADD CONSTRAINT circ_b_a_fk FOREIGN KEY (a_id) REFERENCES app.circ_a (id) MATCH FULL ON DELETE RESTRICT;

------------------------------------------------------------------------------
-- Partitioning: range (with sub-partitions, a default, a partition in another
-- schema), list (with a NULL partition), hash
------------------------------------------------------------------------------
CREATE TABLE app.measurements (
    id      bigint NOT NULL,
    region  text NOT NULL,
    ts      timestamptz NOT NULL,
    value   double precision,
    PRIMARY KEY (id, ts, region)
) PARTITION BY RANGE (ts);
CREATE TABLE app.measurements_2023 PARTITION OF app.measurements
    FOR VALUES FROM ('2023-01-01 00:00:00+00') TO ('2024-01-01 00:00:00+00')
    PARTITION BY LIST (region);
CREATE TABLE app.measurements_2023_eu PARTITION OF app.measurements_2023 FOR VALUES IN ('eu', 'ünï');
CREATE TABLE app.measurements_2023_other PARTITION OF app.measurements_2023 DEFAULT;
CREATE TABLE "MixedCase"."Measurements2024" PARTITION OF app.measurements
    FOR VALUES FROM ('2024-01-01 00:00:00+00') TO ('2025-01-01 00:00:00+00');
CREATE TABLE app.measurements_default PARTITION OF app.measurements DEFAULT;
CREATE INDEX measurements_value_idx ON app.measurements (value);
COMMENT ON TABLE app.measurements IS 'range partitioned, sub-partitioned by list';
INSERT INTO app.measurements
SELECT g, (ARRAY['eu', 'us', 'ünï', 'apac'])[1 + g % 4],
       '2022-07-01 00:00:00+00'::timestamptz + g * interval '5 hours 3 minutes',
       CASE WHEN g % 100 = 0 THEN 'NaN'::float8 ELSE g / 3.0 END
FROM generate_series(1, 3000) g;

CREATE TABLE app.events (
    kind    text,
    id      integer NOT NULL,
    payload jsonb
) PARTITION BY LIST (kind);
CREATE TABLE app.events_click PARTITION OF app.events FOR VALUES IN ('click');
CREATE TABLE app.events_view PARTITION OF app.events FOR VALUES IN ('view', 'View ünï');
CREATE TABLE app.events_null PARTITION OF app.events FOR VALUES IN (NULL);
ALTER TABLE app.events_click REPLICA IDENTITY FULL;
INSERT INTO app.events
SELECT (ARRAY['click', 'view', 'View ünï', NULL])[1 + g % 4], g, jsonb_build_object('g', g)
FROM generate_series(1, 1500) g;

CREATE TABLE app.hashed (id integer PRIMARY KEY, v text) PARTITION BY HASH (id);
CREATE TABLE app.hashed_0 PARTITION OF app.hashed FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE app.hashed_1 PARTITION OF app.hashed FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE app.hashed_2 PARTITION OF app.hashed FOR VALUES WITH (MODULUS 3, REMAINDER 2);
INSERT INTO app.hashed SELECT g, md5(g::text) FROM generate_series(1, 1200) g;

------------------------------------------------------------------------------
-- Inheritance (rows at every level)
------------------------------------------------------------------------------
CREATE TABLE app.cities (name text, population integer, elevation integer);
CREATE TABLE app.capitals (state char(2)) INHERITS (app.cities);
CREATE TABLE app.villages () INHERITS (app.cities);
CREATE TABLE app.hamlets (tiny boolean DEFAULT true) INHERITS (app.villages);
INSERT INTO app.cities SELECT 'city ' || g, g * 1000, g FROM generate_series(1, 300) g;
INSERT INTO app.capitals SELECT 'capital ' || g, g * 5000, g, chr(65 + g % 26) || chr(65 + g % 7) FROM generate_series(1, 50) g;
INSERT INTO app.villages SELECT 'village ' || g, g * 10, g FROM generate_series(1, 200) g;
INSERT INTO app.hamlets (name, population, elevation) SELECT 'hamlet ' || g, g, g FROM generate_series(1, 20) g;

------------------------------------------------------------------------------
-- Unlogged, empty, zero-column, dropped-column tables
------------------------------------------------------------------------------
CREATE UNLOGGED TABLE app.cache (k text PRIMARY KEY, v jsonb);
INSERT INTO app.cache SELECT 'key' || g, jsonb_build_object('v', g) FROM generate_series(1, 500) g;

CREATE TABLE app.empty_table (id integer PRIMARY KEY, note text);
COMMENT ON TABLE app.empty_table IS 'deliberately empty';

CREATE TABLE app.no_columns ();
INSERT INTO app.no_columns DEFAULT VALUES;
INSERT INTO app.no_columns DEFAULT VALUES;
INSERT INTO app.no_columns DEFAULT VALUES;

CREATE TABLE app.dropped (id integer PRIMARY KEY, gone text, kept text, gone2 integer, tail integer);
INSERT INTO app.dropped SELECT g, 'gone' || g, 'kept' || g, g, g * 2 FROM generate_series(1, 1000) g;
ALTER TABLE app.dropped DROP COLUMN gone;
ALTER TABLE app.dropped DROP COLUMN gone2;
-- A "fast default": old rows get it from attmissingval, not from the heap.
ALTER TABLE app.dropped ADD COLUMN added text DEFAULT 'fast default';
INSERT INTO app.dropped (id, kept, tail, added) SELECT g, 'new' || g, g, NULL FROM generate_series(1001, 1100) g;

------------------------------------------------------------------------------
-- Row-level security
------------------------------------------------------------------------------
CREATE TABLE app.secrets (id integer PRIMARY KEY, owner_name text NOT NULL, secret text);
ALTER TABLE app.secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY secrets_own ON app.secrets USING (owner_name = current_user);
CREATE POLICY secrets_reader ON app.secrets FOR SELECT TO pgtest_reader USING (true);
COMMENT ON POLICY secrets_own ON app.secrets IS 'owners see their own rows';
INSERT INTO app.secrets SELECT g, (ARRAY['pgtest_reader', 'pgtest_writer', 'nobody'])[1 + g % 3], md5('s' || g) FROM generate_series(1, 300) g;

CREATE TABLE app.forced (id integer PRIMARY KEY, visible boolean NOT NULL, v text);
ALTER TABLE app.forced OWNER TO pgtest_owner;
ALTER TABLE app.forced ENABLE ROW LEVEL SECURITY;
ALTER TABLE app.forced FORCE ROW LEVEL SECURITY;
CREATE POLICY forced_visible ON app.forced AS RESTRICTIVE USING (visible);
CREATE POLICY forced_all ON app.forced USING (true) WITH CHECK (true);
INSERT INTO app.forced SELECT g, g % 2 = 0, 'f' || g FROM generate_series(1, 400) g;

------------------------------------------------------------------------------
-- Views and materialized views
------------------------------------------------------------------------------
CREATE VIEW app.v_orders AS
    SELECT o.id, c.email, o.qty, o.total
    FROM app.orders o JOIN app.customers c ON c.id = o.customer_id;
COMMENT ON VIEW app.v_orders IS 'plain view';

CREATE VIEW app.v_big_orders WITH (security_barrier) AS
    SELECT * FROM app.orders WHERE qty > 15
    WITH CASCADED CHECK OPTION;

CREATE VIEW "ünï côdé"."vïew ""q""" AS
    SELECT "çolümn 1", "🐘", "ünï côdé"."fünc ""q"""("from") AS doubled FROM "ünï côdé"."tâblé ñame";

CREATE MATERIALIZED VIEW app.mv_totals AS
    SELECT customer_id, count(*) AS n, sum(total) AS total
    FROM app.orders GROUP BY customer_id;
CREATE UNIQUE INDEX mv_totals_customer_idx ON app.mv_totals (customer_id);
COMMENT ON MATERIALIZED VIEW app.mv_totals IS 'populated';

CREATE MATERIALIZED VIEW app.mv_top AS
    SELECT customer_id, total FROM app.mv_totals WHERE total > 2000;
COMMENT ON MATERIALIZED VIEW app.mv_top IS 'depends on another materialized view';

CREATE MATERIALIZED VIEW app.mv_empty AS
    SELECT id, email FROM app.customers
    WITH NO DATA;
COMMENT ON MATERIALIZED VIEW app.mv_empty IS 'never populated';
ALTER MATERIALIZED VIEW app.mv_empty OWNER TO pgtest_owner;

------------------------------------------------------------------------------
-- Large objects (explicit OIDs so that two loads agree)
------------------------------------------------------------------------------
CREATE TABLE app.documents (id integer PRIMARY KEY, name text NOT NULL, content oid);

-- 3.2 MB, larger than every read and write buffer (1 MiB archive blocks,
-- 256 KiB lo_put pieces).
SELECT lo_from_bytea(900001, decode(string_agg(md5('lo' || g), '' ORDER BY g), 'hex'))
FROM generate_series(1, 200000) g;
-- Owned by another role.
SELECT lo_from_bytea(900002, convert_to('owned by pgtest_owner', 'UTF8'));
ALTER LARGE OBJECT 900002 OWNER TO pgtest_owner;
-- All byte values, with grants.
SELECT lo_from_bytea(900003, (SELECT decode(string_agg(lpad(to_hex(g), 2, '0'), '' ORDER BY g), 'hex') FROM generate_series(0, 255) g));
GRANT SELECT ON LARGE OBJECT 900003 TO pgtest_reader;
GRANT SELECT, UPDATE ON LARGE OBJECT 900003 TO "pgtest ünï ""role""";
-- With a comment.
SELECT lo_from_bytea(900004, convert_to(E'commented\n\\.\n', 'UTF8'));
COMMENT ON LARGE OBJECT 900004 IS 'a comment with ''quotes'', ünï côdé and a
newline';
-- Empty.
SELECT lo_from_bytea(900005, ''::bytea);
-- Sparse: a hole between offset 5 and 1000000 reads back as zeros.
SELECT lo_from_bytea(900006, convert_to('start', 'UTF8'));
SELECT lo_put(900006, 1000000, convert_to('end', 'UTF8'));
-- Many small ones.
SELECT count(lo_from_bytea(910000 + g, convert_to(md5(g::text), 'UTF8'))) FROM generate_series(0, 199) g;

INSERT INTO app.documents VALUES
    (1, 'big', 900001), (2, 'owned', 900002), (3, 'bytes', 900003),
    (4, 'commented', 900004), (5, 'empty', 900005), (6, 'sparse', 900006), (7, 'dangling', 123456789);

------------------------------------------------------------------------------
-- Privileges and ownership
------------------------------------------------------------------------------
GRANT USAGE ON SCHEMA app TO pgtest_reader, pgtest_writer;
GRANT USAGE ON SCHEMA "ünï côdé" TO "pgtest ünï ""role""";
GRANT SELECT ON ALL TABLES IN SCHEMA app TO pgtest_reader;
GRANT INSERT, UPDATE ON app.orders TO pgtest_writer;
GRANT SELECT (id, name), UPDATE (name) ON app.customers TO "pgtest ünï ""role""";
GRANT SELECT ON "ünï côdé"."tâblé ñame" TO "pgtest ünï ""role""" WITH GRANT OPTION;
GRANT ALL ON app.secrets TO pgtest_writer;
REVOKE ALL ON app.cache FROM pgtest_reader;
GRANT EXECUTE ON PROCEDURE app.noop(text) TO pgtest_writer;
ALTER FUNCTION app.split_pair(text) OWNER TO pgtest_owner;
ALTER TYPE app.floatrange OWNER TO pgtest_owner;
ALTER TABLE app.circ_b OWNER TO pgtest_owner;
ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO pgtest_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE pgtest_owner REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
