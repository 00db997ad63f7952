package pgtest

// selectionSQL is a source for partial restores: two schemas with a
// foreign key between them, serial and identity columns, a trigger and its
// function, a view, a comment, hostile names, and a table big enough to be
// dumped in several chunks.
const selectionSQL = `
CREATE SCHEMA app;
CREATE TABLE app.customers (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
CREATE TABLE app.orders (id serial PRIMARY KEY, customer_id int NOT NULL REFERENCES app.customers, note text,
	touched timestamptz);
CREATE INDEX orders_note ON app.orders (note);
COMMENT ON TABLE app.orders IS 'orders, one per line';
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.touched := now(); RETURN NEW; END$$;
CREATE TRIGGER orders_touch BEFORE UPDATE ON app.orders FOR EACH ROW EXECUTE FUNCTION app.touch();
CREATE VIEW app.order_view AS SELECT o.id, c.name FROM app.orders o JOIN app.customers c ON c.id = o.customer_id;
CREATE SCHEMA "we""ird
sch";
CREATE TABLE "we""ird
sch"."t; drop" (id int PRIMARY KEY, customer_id int REFERENCES app.customers, "v""al" text);
CREATE TABLE "we""ird
sch"."Other" (x int);
CREATE TABLE public.big (id bigint PRIMARY KEY, pad text);
INSERT INTO app.customers (name) SELECT 'customer ' || g FROM generate_series(1, 200) g;
INSERT INTO app.orders (customer_id, note) SELECT 1 + g % 200, 'note ' || g FROM generate_series(1, 3000) g;
INSERT INTO "we""ird
sch"."t; drop" SELECT g, 1 + g % 200, E'a\tb\\c' || g FROM generate_series(1, 500) g;
INSERT INTO "we""ird
sch"."Other" SELECT g FROM generate_series(1, 10) g;
INSERT INTO public.big SELECT g, repeat('x', 200) FROM generate_series(1, 40000) g;
ANALYZE;
`

// WeirdTable is the table of SelectionSQL's hostile names, quoted: a
// schema with a quote and a newline, a table with a semicolon.
const WeirdTable = "\"we\"\"ird\nsch\".\"t; drop\""

// SelectionSQL is the source of the tests of partial restores (restore's
// and the binary's): a script for psql (ExecPsql).
func SelectionSQL() string { return selectionSQL }
