package main

import (
	"strconv"
	"strings"
)

// class is what a follow must do with a DDL statement run on its source.
type class int

const (
	// replayed: the target runs it and ends equal; finish may succeed.
	replayed class = iota
	// stopped: a named stop (status exits 1 naming it, finish refuses
	// before the fence): replaying it would change data differently.
	stopped
	// either: replayed exactly or a named stop, never an apply error
	// loop nor a difference found only after the fence.
	either
)

func (c class) String() string {
	return [...]string{"replayed", "stopped", "either"}[c]
}

// entry is one draw from the corpus: pre and post run (each statement
// alone) before and after stmt, and are replayable themselves; stmt is
// what the class is about. mayFail: stmt is expected to fail on the
// source (a failed CREATE UNIQUE INDEX CONCURRENTLY leaves an invalid
// index behind).
type entry struct {
	pre     []string
	stmt    string
	post    []string
	class   class
	mayFail bool
	// concurrent: cannot run while a prepared transaction is open (it
	// waits for every older transaction).
	concurrent bool
}

// expand puts the round-unique number n in place of {n}, and {k0} and
// {k1} (a partition's bounds: events has 0 to 1000) after it.
func expand(s string, n int) string {
	return strings.NewReplacer("{n}", strconv.Itoa(n), "{k0}", strconv.Itoa(n*1000), "{k1}", strconv.Itoa(n*1000+1000)).Replace(s)
}

// baseSchema is each round's source database before the clone: small
// pgbench-like tables the writers update, the acknowledged-write log,
// and the tables and domains the corpus changes.
const baseSchema = `
CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int NOT NULL, filler char(88));
CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int NOT NULL, tbalance int NOT NULL, filler char(84));
CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
CREATE TABLE pgbench_history (hid bigserial PRIMARY KEY, tid int, bid int, aid int, delta int, mtime timestamp, filler char(22));
INSERT INTO pgbench_branches SELECT i, 0 FROM generate_series(1, 2) i;
INSERT INTO pgbench_tellers SELECT i, 1 + (i - 1) / 10, 0 FROM generate_series(1, 20) i;
INSERT INTO pgbench_accounts SELECT i, 1 + (i - 1) / 1000, 0 FROM generate_series(1, 2000) i;
CREATE TABLE acked (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now());
CREATE TABLE items (id int PRIMARY KEY, v text, n int);
INSERT INTO items SELECT i, 'v' || i, i % 7 FROM generate_series(1, 200) i;
CREATE TABLE events (k int PRIMARY KEY, v text) PARTITION BY RANGE (k);
CREATE TABLE events_0 PARTITION OF events FOR VALUES FROM (0) TO (1000);
INSERT INTO events SELECT i, 'e' || i FROM generate_series(0, 99) i;
CREATE SEQUENCE items_seq;
CREATE DOMAIN ts_now AS timestamptz DEFAULT now();
CREATE DOMAIN rnd AS float8 DEFAULT random();
`

// corpus is the DDL a round draws from: statements a follow replays
// exactly, statements it must stop on by name, and statements it may do
// either with. It holds every reproduction of issue 41's DDL defects.
var corpus = []entry{
	// Replayed.
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} text DEFAULT 'x{n}'`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int NOT NULL DEFAULT {n}`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} numeric(10,2) DEFAULT 1.5`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} date DEFAULT '2020-01-01'`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int[] DEFAULT '{1,2}'`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} jsonb DEFAULT '{"a": 1}'`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} text DEFAULT E'a\'b;c'`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} text COLLATE "C" DEFAULT 'z'`},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int DEFAULT 5, ADD COLUMN e{n} text`},
	{stmt: `ALTER TABLE pgbench_history ADD COLUMN note{n} text`},
	{stmt: `ALTER TABLE pgbench_accounts ADD COLUMN c{n} int DEFAULT 0`},
	{stmt: `CREATE INDEX items_i{n} ON items (n)`},
	{stmt: `CREATE INDEX CONCURRENTLY items_ci{n} ON items (v)`, concurrent: true},
	{stmt: `CREATE INDEX CONCURRENTLY IF NOT EXISTS items_ine{n} ON items (id, v)`, concurrent: true},
	{stmt: `CREATE UNIQUE INDEX items_u{n} ON items (id, n)`},
	{stmt: `CREATE INDEX items_e{n} ON items ((lower(v)))`},
	{stmt: `CREATE INDEX items_p{n} ON items (n) WHERE n > 3`},
	{pre: []string{`CREATE INDEX items_x{n} ON items (n, id)`}, stmt: `ALTER INDEX items_x{n} RENAME TO items_y{n}`},
	{pre: []string{`CREATE INDEX items_z{n} ON items (v, n)`}, stmt: `DROP INDEX items_z{n}`},
	{pre: []string{`ALTER TABLE items ADD COLUMN c{n} int`}, stmt: `ALTER TABLE items ALTER COLUMN c{n} TYPE bigint`},
	{pre: []string{`ALTER TABLE items ADD COLUMN c{n} int DEFAULT 3`}, stmt: `ALTER TABLE items ALTER COLUMN c{n} TYPE text USING c{n}::text`},
	{pre: []string{`ALTER TABLE items ADD COLUMN c{n} varchar(20)`}, stmt: `ALTER TABLE items ALTER COLUMN c{n} TYPE varchar(300)`},
	{stmt: `COMMENT ON TABLE items IS 'comment {n}'`},
	{stmt: `COMMENT ON TABLE items IS E'it\'s {n}; still one statement'`},
	{stmt: `COMMENT ON COLUMN items.v IS $$dollar; quoted {n}$$`},
	{stmt: "-- migration {n}\nALTER TABLE items ADD COLUMN c{n} int"},
	{stmt: `/* migration {n} */ ALTER TABLE items ADD COLUMN c{n} int`},
	{pre: []string{`ALTER TABLE items ADD COLUMN r{n} int`}, stmt: `ALTER TABLE items RENAME COLUMN r{n} TO s{n}`},
	{pre: []string{`ALTER TABLE items ADD COLUMN d{n} int`}, stmt: `ALTER TABLE items DROP COLUMN d{n}`},
	{stmt: `ALTER TABLE items ADD CONSTRAINT ck{n} CHECK (id > 0)`},
	{stmt: `ALTER TABLE items ALTER COLUMN v SET DEFAULT 'd{n}'`},
	{stmt: `ALTER TABLE items SET (fillfactor = 90)`},
	{stmt: `ALTER TABLE items ALTER COLUMN v SET STATISTICS 200`},
	{stmt: `ALTER TABLE items ADD COLUMN g{n} int GENERATED ALWAYS AS (id * 10) STORED`},
	{stmt: `GRANT SELECT ON items TO PUBLIC`},
	{stmt: `CREATE VIEW view{n} AS SELECT id, v FROM items WHERE n = 1`},
	{stmt: `CREATE MATERIALIZED VIEW mvi{n} AS SELECT n, count(*) AS c FROM items GROUP BY n`},
	{stmt: `CREATE SEQUENCE seq{n}`, post: []string{`SELECT nextval('seq{n}')`, `SELECT nextval('seq{n}')`}},
	{stmt: `CREATE FUNCTION f{n}() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$`},
	{stmt: `CREATE FUNCTION g{n}(x int) RETURNS int LANGUAGE plpgsql AS $f$ BEGIN RETURN x + 1; END; $f$`},
	{stmt: `CREATE TYPE mood{n} AS ENUM ('sad', 'ok')`},
	{pre: []string{`CREATE TYPE hue{n} AS ENUM ('red', 'blue')`}, stmt: `ALTER TABLE items ADD COLUMN h{n} hue{n}`},
	{stmt: `CREATE SCHEMA s{n}`, post: []string{`CREATE TABLE s{n}.t (id int PRIMARY KEY)`, `INSERT INTO s{n}.t SELECT generate_series(1, 20)`}},
	// New tables, some with materialized views over them.
	{stmt: `CREATE TABLE new{n} (id int PRIMARY KEY, v text)`, post: []string{`INSERT INTO new{n} SELECT i, 'n' || i FROM generate_series(1, 50) i`}},
	{stmt: `CREATE TABLE new{n} (id int PRIMARY KEY, v text)`, post: []string{`INSERT INTO new{n} SELECT i, 'n' || i FROM generate_series(1, 50) i`, `UPDATE new{n} SET v = 'u' WHERE id % 3 = 0`, `DELETE FROM new{n} WHERE id % 7 = 0`}},
	{pre: []string{`CREATE TABLE new{n} (id int PRIMARY KEY, v text)`, `INSERT INTO new{n} SELECT i, 'n' || i FROM generate_series(1, 40) i`},
		stmt: `CREATE MATERIALIZED VIEW mv{n} AS SELECT count(*) AS c, max(id) AS m FROM new{n}`},
	{pre: []string{`CREATE TABLE new{n} (id int PRIMARY KEY, v text)`, `CREATE MATERIALIZED VIEW mv{n} AS SELECT count(*) AS c FROM new{n}`},
		stmt: `INSERT INTO new{n} SELECT generate_series(1, 30)`, post: []string{`REFRESH MATERIALIZED VIEW mv{n}`}},
	{pre: []string{`CREATE TABLE new{n} (id int PRIMARY KEY)`}, stmt: `DROP TABLE new{n}`},
	{pre: []string{`CREATE TABLE new{n} (id int PRIMARY KEY)`, `INSERT INTO new{n} SELECT generate_series(1, 10)`}, stmt: `TRUNCATE new{n}`},
	{stmt: `CREATE TABLE new{n} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text)`, post: []string{`INSERT INTO new{n} (v) SELECT 'i' || i FROM generate_series(1, 25) i`}},
	{stmt: `CREATE TABLE new{n} (id serial PRIMARY KEY, v text)`, post: []string{`INSERT INTO new{n} (v) SELECT 's' || i FROM generate_series(1, 25) i`}},
	{stmt: `CREATE TABLE new{n} (id int PRIMARY KEY, t timestamptz DEFAULT now())`, post: []string{`INSERT INTO new{n} (id) SELECT generate_series(1, 10)`}},
	{stmt: `CREATE TABLE new{n} (id int PRIMARY KEY REFERENCES items (id))`, post: []string{`INSERT INTO new{n} SELECT generate_series(1, 10)`}},
	{stmt: `CREATE TABLE events_{n} PARTITION OF events FOR VALUES FROM ({k0}) TO ({k1})`, post: []string{`INSERT INTO events SELECT i, 'p' FROM generate_series({k0}, {k0} + 20) i`}},

	// Stopped: replaying them would give the target other data.
	{stmt: `ALTER TABLE items ADD COLUMN c{n} timestamptz DEFAULT now()`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} timestamptz DEFAULT 'now'`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} timestamp DEFAULT 'now'::timestamp`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} timestamptz DEFAULT CURRENT_TIMESTAMP`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} timestamptz DEFAULT clock_timestamp()`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} ts_now`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} rnd`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} float8 DEFAULT random()`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} uuid DEFAULT gen_random_uuid()`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int DEFAULT nextval('items_seq')`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} serial`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int GENERATED ALWAYS AS IDENTITY`, class: stopped},
	{pre: []string{`ALTER TABLE items ADD COLUMN c{n} int`}, stmt: `ALTER TABLE items ALTER COLUMN c{n} TYPE bigint USING (id + (random() * 1000)::int)`, class: stopped},
	{pre: []string{`ALTER TABLE items ADD COLUMN c{n} text`}, stmt: `ALTER TABLE items ALTER COLUMN c{n} TYPE varchar(100) USING now()::text`, class: stopped},
	{pre: []string{`CREATE DOMAIN rnd{n} AS float8 DEFAULT random()`}, stmt: `ALTER TABLE items ADD COLUMN c{n} rnd{n}`, class: stopped},
	{stmt: `COMMENT ON TABLE items IS E'\''; INSERT INTO items VALUES (100000 + {n}, 'dup', 0); SELECT 'x'`, class: stopped},
	{stmt: `COMMENT ON COLUMN items.v IS E'\\'; INSERT INTO items VALUES (200000 + {n}, 'e', 1); SELECT E'\''`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN a{n} int; ALTER TABLE items ADD COLUMN b{n} int`, class: stopped},
	{stmt: `INSERT INTO items VALUES (300000 + {n}, 'm', 2); ALTER TABLE items ADD COLUMN c{n} int`, class: stopped},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} int /* ; */; ALTER TABLE items ADD COLUMN e{n} int -- ;`, class: stopped},
	{stmt: `CREATE TABLE new{n} (id int PRIMARY KEY, v text); INSERT INTO new{n} VALUES (1, 'a')`, class: stopped},
	{stmt: `DO $$ BEGIN EXECUTE 'ALTER TABLE items ADD COLUMN c{n} int'; END $$`, class: stopped},
	{stmt: `CREATE TABLE ctas{n} AS SELECT id, v FROM items`, class: stopped},
	{stmt: `SELECT id, v INTO sel{n} FROM items`, class: stopped},
	{pre: []string{`CREATE FUNCTION ddl{n}() RETURNS void LANGUAGE plpgsql AS $$ BEGIN ALTER TABLE items ADD COLUMN c{n} int; END $$`}, stmt: `SELECT ddl{n}()`, class: stopped},
	{pre: []string{`CREATE PROCEDURE p{n}() LANGUAGE plpgsql AS $$ BEGIN ALTER TABLE items ADD COLUMN c{n} int; END $$`}, stmt: `CALL p{n}()`, class: stopped},

	// Either: replayed exactly or stopped by name, never an apply error.
	{stmt: `/* migration {n} */ CREATE INDEX CONCURRENTLY items_mc{n} ON items (n)`, class: either, concurrent: true},
	{stmt: "-- migration {n}\nCREATE INDEX CONCURRENTLY items_lc{n} ON items (n, v)", class: either, concurrent: true},
	{pre: []string{`CREATE TABLE events_{n} PARTITION OF events FOR VALUES FROM ({k0}) TO ({k1})`, `INSERT INTO events VALUES ({k0}, 'd')`},
		stmt: `ALTER TABLE events DETACH PARTITION events_{n} CONCURRENTLY`, class: either, concurrent: true},
	{stmt: `CREATE UNIQUE INDEX CONCURRENTLY items_bad{n} ON items (n)`, post: []string{`DROP INDEX items_bad{n}`}, class: either, mayFail: true, concurrent: true},
	{pre: []string{`CREATE INDEX items_w{n} ON items (id, n)`}, stmt: `DROP INDEX CONCURRENTLY items_w{n}`, class: either, concurrent: true},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} date DEFAULT CURRENT_DATE`, class: either},
	{stmt: `ALTER TABLE items ADD COLUMN c{n} text DEFAULT current_user`, class: either},
	{pre: []string{`CREATE TABLE ev{n} (LIKE events INCLUDING ALL)`, `INSERT INTO ev{n} SELECT i, 'a' FROM generate_series({k0}, {k0} + 5) i`},
		stmt: `ALTER TABLE events ATTACH PARTITION ev{n} FOR VALUES FROM ({k0}) TO ({k1})`, class: either},
}
