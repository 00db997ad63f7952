package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// chunkedSQL builds tables whose catalog estimates and physical layout
// disagree with their contents in every way that could make a chunk plan
// lose or repeat rows.
const chunkedSQL = `
-- grew after ANALYZE: relpages is stale low
CREATE TABLE grew (id int8 PRIMARY KEY, t text);
INSERT INTO grew SELECT s, md5(s::text) FROM generate_series(1, 500) s;
ANALYZE grew;
INSERT INTO grew SELECT s, md5(s::text) FROM generate_series(501, 20000) s;

-- shrank: relpages stale high, most pages now empty
CREATE TABLE shrank (id int4 PRIMARY KEY, t text);
INSERT INTO shrank SELECT s, md5(s::text) FROM generate_series(1, 20000) s;
ANALYZE shrank;
DELETE FROM shrank WHERE id % 10 <> 0 OR id > 15000;

-- shrank and truncated by VACUUM: the file is shorter than relpages said
CREATE TABLE truncated (id int4 PRIMARY KEY, t text) WITH (autovacuum_enabled = off);
INSERT INTO truncated SELECT s, md5(s::text) FROM generate_series(1, 20000) s;
ANALYZE truncated;
DELETE FROM truncated WHERE id > 3000;
VACUUM truncated;
INSERT INTO truncated SELECT s, 'again' FROM generate_series(3001, 4000) s;

-- HOT updates (an unindexed column, room on the page) and non-HOT ones
-- (the key changes, so new versions land on other pages)
CREATE TABLE hot (id int4 PRIMARY KEY, n int, t text) WITH (fillfactor = 50);
INSERT INTO hot SELECT s, 0, md5(s::text) FROM generate_series(1, 20000) s;
ANALYZE hot;
UPDATE hot SET n = n + 1 WHERE id % 3 = 0;
UPDATE hot SET n = n + 1 WHERE id % 3 = 0;
CREATE TABLE nonhot (id int4 PRIMARY KEY, t text);
INSERT INTO nonhot SELECT s, md5(s::text) FROM generate_series(1, 20000) s;
ANALYZE nonhot;
UPDATE nonhot SET id = id + 1000000, t = t || 'x' WHERE id % 4 = 0;

-- scattered deletes
CREATE TABLE holes (id int8 UNIQUE, t text);
INSERT INTO holes SELECT s, md5(s::text) FROM generate_series(1, 20000) s;
DELETE FROM holes WHERE (id * 7919) % 13 < 4;
INSERT INTO holes SELECT NULL, 'null key ' || s FROM generate_series(1, 50) s;
ANALYZE holes;

-- TOASTed rows, out of line and incompressible
CREATE TABLE toasted (id int4 PRIMARY KEY, big text);
INSERT INTO toasted SELECT s, (SELECT string_agg(md5(s::text || g::text), '') FROM generate_series(1, 200) g)
	FROM generate_series(1, 400) s;

-- no columns, and a generated column left out of COPY
CREATE TABLE nocols ();
INSERT INTO nocols SELECT FROM generate_series(1, 30000);
CREATE TABLE generated (id int4 PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED);
INSERT INTO generated (id, a) SELECT s, s FROM generate_series(1, 20000) s;
`

// TestChunkedRoundTrip dumps every table in many chunks (a tiny
// --chunk-size), by ctid and by key, and restores: row counts and content
// hashes must be identical for every staleness case above; the tables
// smaller than a connection's share of the data are loaded whole and
// frozen, the larger one in chunks on every connection. auto (the
// default, which the other tests' chunked dumps take) splits exactly as
// ctid does on PostgreSQL 14 and later, as key before: `make test-long`
// runs it too.
func TestChunkedRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	const src = "chunked"
	if err := c.CreateDB(ctx, src); err != nil {
		t.Fatal(err)
	}
	if err := c.ExecPsql(ctx, src, chunkedSQL); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	methods := []string{"key"}
	if c.Version() >= 14 {
		methods = append(methods, "ctid")
	}
	if long {
		methods = append(methods, "auto")
	}
	for _, m := range methods {
		t.Run(m, func(t *testing.T) {
			file := filepath.Join(dir, m+".pgs")
			r := mustPgsprint(t, "dump", "-d", c.ConnString(src), "-f", file, "-j", "3",
				"--chunk-size", "16kB", "--split-by", m)
			match := regexp.MustCompile(`dumped (\d+) tables in (\d+) chunks`).FindStringSubmatch(r.stderr)
			if match == nil {
				t.Fatalf("no summary line in %q", r.stderr)
			}
			tables, _ := strconv.Atoi(match[1])
			chunks, _ := strconv.Atoi(match[2])
			if chunks < 10*tables {
				t.Errorf("%d tables in only %d chunks: the tables were not split", tables, chunks)
			}
			dst := "dst_" + m
			if err := c.CreateDB(ctx, dst); err != nil {
				t.Fatal(err)
			}
			mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString(dst), "-j", "3", "-q")
			pgtest.RequireSameSchema(t, c.BinDir(), c.ConnString(src), c.ConnString(dst))
			pgtest.RequireSameData(t, c.ConnString(src), c.ConnString(dst))
			// Every table but toasted holds less than a third of the data:
			// each was loaded whole, its chunks in one transaction, so its
			// rows were written frozen (COPY FREEZE sets its pages
			// all-frozen). toasted holds more: its chunks were loaded
			// apart, on all three connections.
			if err := c.Exec(ctx, dst, "CREATE EXTENSION pg_visibility"); err != nil {
				t.Fatal(err)
			}
			frozen := pgtest.Scalar(t, c.ConnString(dst), `SELECT coalesce(string_agg(c.relname, ' ' ORDER BY c.relname), '')
				FROM pg_class c, pg_visibility_map_summary(c.oid) s
				WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' AND pg_relation_size(c.oid) > 0
				AND s.all_frozen = pg_relation_size(c.oid) / current_setting('block_size')::int8`)
			want := "generated grew holes hot nocols nonhot shrank truncated"
			if m == "key" {
				// nocols has no key: one chunk, under freezeMinBytes.
				want = "generated grew holes hot nonhot shrank truncated"
			}
			if frozen != want {
				t.Errorf("tables written frozen: %q, want %q", frozen, want)
			}
		})
	}
}
