package pgtest

// notOursSQL is a small source: a serial table (with its sequence
// t1_id_seq) in more than one block, a materialized view, and a schema with
// an enum type, a table owned by another role and a function.
const notOursSQL = `
CREATE TABLE t1 (id serial PRIMARY KEY, v text NOT NULL);
INSERT INTO t1 (v) SELECT md5(i::text) FROM generate_series(1, 50000) i;
CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t1;
CREATE SCHEMA app;
CREATE TYPE app.mood AS ENUM ('sad', 'ok');
CREATE ROLE notours_owner;
CREATE TABLE app.x (id int PRIMARY KEY, m app.mood);
ALTER TABLE app.x OWNER TO notours_owner;
INSERT INTO app.x SELECT i, 'ok' FROM generate_series(1, 100) i;
CREATE FUNCTION app.f(int) RETURNS int LANGUAGE sql AS 'SELECT $1';
`

// NotOursSQL is the source of the tests of a restore into a target that
// holds objects of its own (restore's and the binary's); it creates role
// notours_owner, so it goes into a cluster of the test's own.
func NotOursSQL() string { return notOursSQL }
