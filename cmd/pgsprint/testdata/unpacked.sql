-- The source of testdata/unpacked.pgs, an archive written by pgsprint before
-- packed frames (format version 1, one stream per table and large object):
-- TestUnpackedArchiveRestores builds this database again and compares a
-- restore of that archive with it.
CREATE TABLE public.customer (id int PRIMARY KEY, name text NOT NULL, joined date);
CREATE TABLE public."Odd ""name""" (k bigint, v text, b bytea);
CREATE TABLE public.orders (id bigserial PRIMARY KEY, customer int REFERENCES public.customer, total numeric(10,2), note text);
CREATE INDEX ON public.orders (customer);
CREATE TABLE public.empty (x int);
INSERT INTO public.customer SELECT g, 'customer ' || g, date '2024-01-01' + g FROM generate_series(1, 200) g;
INSERT INTO public."Odd ""name""" VALUES (1, E'tab\tnewline\nbackslash\\', '\x00ff'), (2, NULL, NULL), (3, repeat('long ', 2000), decode(repeat('ab', 500), 'hex'));
INSERT INTO public.orders (customer, total, note) SELECT 1 + g % 200, g * 1.25, md5(g::text) FROM generate_series(1, 1000) g;
SELECT lo_from_bytea(70000, ''::bytea);
SELECT lo_from_bytea(70000 + g, convert_to(repeat(md5(g::text), 3) || lpad(g::text, 4, '0'), 'UTF8')) FROM generate_series(1, 20) g;
SELECT lo_from_bytea(70100, decode(repeat('00ff', 35000), 'hex'));
COMMENT ON LARGE OBJECT 70100 IS 'the big one';
