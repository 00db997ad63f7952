package pgtest

import (
	"context"
	"testing"
)

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

// NewNotOurs starts a cluster of the test's own with NotOursSQL loaded in
// database src, and returns it with src's connection string: the source
// whose archive the damage tests cut and flip.
func NewNotOurs(t testing.TB) (c *Instance, src string) {
	t.Helper()
	ctx := context.Background()
	c = New(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, "src", NotOursSQL()); err != nil {
		t.Fatal(err)
	}
	return c, c.ConnString("src")
}
