package follow

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// captureSourceSQL is the schema the capture's direct tests start from.
const captureSourceSQL = `CREATE TABLE t (id int PRIMARY KEY, v text, x int, at timestamptz);
	INSERT INTO t SELECT i, 'v' || i, i FROM generate_series(1, 10) i;
	CREATE TABLE s (id serial PRIMARY KEY, v text);
	INSERT INTO s (v) VALUES ('a'), ('b');
	CREATE TABLE p (id int, at int) PARTITION BY RANGE (at);
	CREATE TABLE p1 PARTITION OF p FOR VALUES FROM (0) TO (100);
	CREATE TABLE p2 PARTITION OF p FOR VALUES FROM (100) TO (200);
	CREATE TABLE dup (id int, k int);
	INSERT INTO dup VALUES (1, 1), (2, 1);
	CREATE DOMAIN ts_now AS timestamptz DEFAULT now();
	CREATE DOMAIN float_rand AS float8 DEFAULT random();
	CREATE DOMAIN int_seven AS int DEFAULT 7`

// captureOnly creates a database on c holding setup and the DDL capture
// of a source (a publication FOR ALL TABLES of the follow's name, no
// slot, no target): what the event triggers record can be read at once.
func captureOnly(t *testing.T, c *pgtest.Instance, setup string) (*pgx.ConnConfig, Names) {
	t.Helper()
	ctx := context.Background()
	db := pgtest.UniqueName("capture")
	if err := c.CreateDB(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(ctx, db, setup); err != nil {
		t.Fatal(err)
	}
	n, err := Names{}.Resolve(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(t, c.ConnString(db))
	exec(t, cfg, "CREATE PUBLICATION "+pg.Ident(n.Publication)+" FOR ALL TABLES")
	withConn(t, cfg, func(ctx context.Context, conn *pgx.Conn) {
		if err := installCapture(ctx, conn, n, filter.Options{}, true, true); err != nil {
			t.Fatal(err)
		}
	})
	return cfg, n
}

// TestDDLSplit calls the capture's statement lexer (ddl_split.sql)
// directly: each query string and the statements it holds.
func TestDDLSplit(t *testing.T) {
	t.Parallel()
	c := sharedLogical(t)
	cfg, n := captureOnly(t, c, "SELECT 1")
	for _, tc := range []struct {
		q    string
		std  bool
		want []string
	}{
		{"/* migration 42 */ CREATE INDEX CONCURRENTLY i ON t (v)", true, []string{"CREATE INDEX CONCURRENTLY i ON t (v)"}},
		{"-- a comment; with a semicolon\nCREATE TABLE a (id int);", true, []string{"CREATE TABLE a (id int)"}},
		{`COMMENT ON TABLE t IS E'\''; INSERT INTO t (id) VALUES (1); SELECT 'x'`, true,
			[]string{`COMMENT ON TABLE t IS E'\''`, "INSERT INTO t (id) VALUES (1)", "SELECT 'x'"}},
		{`COMMENT ON TABLE t IS e'a\\'; SELECT 2`, true, []string{`COMMENT ON TABLE t IS e'a\\'`, "SELECT 2"}},
		{`SELECT 'a\'; SELECT 1`, true, []string{`SELECT 'a\'`, "SELECT 1"}},
		{`SELECT 'a\'; SELECT 1'`, false, []string{`SELECT 'a\'; SELECT 1'`}},
		{"SELECT 'it''s; here'; SELECT 2", true, []string{"SELECT 'it''s; here'", "SELECT 2"}},
		{"SELECT $a1$;$a1$; SELECT $$;$$", true, []string{"SELECT $a1$;$a1$", "SELECT $$;$$"}},
		{"SELECT $é$ ; $é$", true, []string{"SELECT $é$ ; $é$"}},
		{"SELECT 1 /* ; /* ; */ ; */; SELECT 2", true, []string{"SELECT 1", "SELECT 2"}},
		{"-- only a comment", true, nil},
		{";; \n ;", true, nil},
		{"SELECT \"a;\"\"b\" FROM t -- x\n; SELECT 2", true, []string{"SELECT \"a;\"\"b\" FROM t", "SELECT 2"}},
		{"SELECT $1; SELECT a$b FROM t", true, []string{"SELECT $1", "SELECT a$b FROM t"}},
		{`SELECT U&'d\0061t\+000061;'; SELECT 2`, true, []string{`SELECT U&'d\0061t\+000061;'`, "SELECT 2"}},
		{"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$", true, []string{"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$"}},
		{"SELECT 'unterminated; SELECT 2", true, []string{"SELECT 'unterminated; SELECT 2"}},
	} {
		got := query(t, cfg, "SELECT stmt FROM "+captureNames(n.Slot).split+"($1, $2)", tc.q, tc.std)
		if !slices.Equal(got, tc.want) {
			t.Errorf("split(%q, std %v) = %q, want %q", tc.q, tc.std, got, tc.want)
		}
	}
	// What the recording function reads of a statement besides its text.
	for _, tc := range []struct{ q, col, want string }{
		{"ALTER TABLE t ALTER x TYPE bigint USING (x + random() * 100)::bigint", "ucalls", "{random}"},
		{"ALTER TABLE t ALTER x TYPE numeric(12,2) USING x::numeric(12,2) + CAST(1 AS numeric(3))", "ucalls", "{cast}"},
		{"ALTER TABLE t ALTER x TYPE text USING x || current_timestamp || lower ( v )", "ucalls", "{current_timestamp,lower}"},
		{"ALTER TABLE t ADD a date DEFAULT ' Today', ADD b text DEFAULT 'now()'", "special", "{today}"},
		{"/* x */ DROP INDEX CONCURRENTLY \"i\"", "words", "{DROP,INDEX,CONCURRENTLY}"},
		{"/* é */ DROP /* é */ INDEX", "wpos", "{0,14}"},
	} {
		if got := scalar(t, cfg, "SELECT "+tc.col+"::text FROM "+captureNames(n.Slot).split+"($1, true)", tc.q); got != tc.want {
			t.Errorf("split(%q).%s = %s, want %s", tc.q, tc.col, got, tc.want)
		}
	}
}

// TestDDLCapture runs DDL on a source with the capture (no replication)
// and reads what the event triggers record for each statement: the
// statement the target replays, exactly, or a stop and its reason. It
// covers the reproductions of issue 41 (items 5, 6 and 11).
func TestDDLCapture(t *testing.T) {
	t.Parallel()
	c := sharedLogical(t)
	cfg, n := captureOnly(t, c, captureSourceSQL)
	table := captureNames(n.Slot).table
	// want: "apply <the command replayed>" or "stop <the reason's start>",
	// one per row recorded; fails: the statement fails on the source.
	cases := []struct {
		q     string
		fails string
		want  []string
	}{
		// Item 5: what the target cannot run in its apply worker's transaction.
		{q: "CREATE INDEX CONCURRENTLY t_v ON t (v)", want: []string{"apply CREATE INDEX  t_v ON t (v)"}},
		{q: "/* migration 42 */ CREATE INDEX CONCURRENTLY t_x ON t (x)", want: []string{"apply CREATE INDEX  t_x ON t (x)"}},
		{q: "-- migration 43\ncreate unique index concurrently if not exists t_id2 on t (id);", want: []string{"apply create unique index  if not exists t_id2 on t (id)"}},
		{q: "/* a /* nested */ comment */ DROP INDEX CONCURRENTLY t_id2", want: []string{"apply DROP INDEX IF EXISTS  t_id2"}},
		{q: "DROP INDEX IF EXISTS t_x", want: []string{"apply DROP INDEX IF EXISTS t_x"}},
		{q: "CREATE UNIQUE INDEX CONCURRENTLY dup_k ON dup (k)", fails: "could not create unique index"},
		{q: "DROP INDEX dup_k", want: []string{"apply DROP INDEX IF EXISTS dup_k"}},
		{q: "ALTER TABLE p DETACH PARTITION p2 CONCURRENTLY", want: []string{"stop DETACH PARTITION CONCURRENTLY runs in two transactions"}},
		{q: "ALTER TABLE p DETACH PARTITION p1", want: []string{"apply ALTER TABLE p DETACH PARTITION p1"}},
		// Item 11: a stored generated column is deterministic.
		{q: "ALTER TABLE t ADD COLUMN g int GENERATED ALWAYS AS (id * 10) STORED", want: []string{"apply ALTER TABLE t ADD COLUMN g int GENERATED ALWAYS AS (id * 10) STORED"}},
		{q: "ALTER TABLE s ADD COLUMN g int GENERATED ALWAYS AS (id * 10) STORED", want: []string{"apply ALTER TABLE s ADD COLUMN g int GENERATED ALWAYS AS (id * 10) STORED"}},
		// Item 6: DDL that changes data.
		{q: "ALTER TABLE t ALTER COLUMN x TYPE bigint USING (x + random() * 100)::bigint", want: []string{"stop its USING expression calls random"}},
		{q: "ALTER TABLE t ALTER COLUMN v TYPE text USING v || now()", want: []string{"stop its USING expression calls now"}},
		{q: "ALTER TABLE t ALTER COLUMN v TYPE text USING v || CURRENT_TIMESTAMP", want: []string{"stop its USING expression calls current_timestamp"}},
		{q: "ALTER TABLE t ALTER COLUMN x TYPE numeric(12,2) USING x::numeric(12,2)", want: []string{"apply ALTER TABLE t ALTER COLUMN x TYPE numeric(12,2) USING x::numeric(12,2)"}},
		{q: "ALTER TABLE t ALTER COLUMN x TYPE text USING to_char(x, 'FM999999.00')", want: []string{"stop its USING expression calls to_char"}},
		{q: "ALTER TABLE t ALTER COLUMN x TYPE text USING md5(x)", want: []string{"apply ALTER TABLE t ALTER COLUMN x TYPE text USING md5(x)"}},
		{q: "ALTER TABLE t ADD COLUMN a1 timestamptz DEFAULT now()", want: []string{"stop the default of public.t.a1 is evaluated once"}},
		{q: "ALTER TABLE t ADD COLUMN a2 timestamptz DEFAULT 'now'", want: []string{"stop it holds the constant 'now'"}},
		{q: "ALTER TABLE t ADD COLUMN a3 date DEFAULT 'today'", want: []string{"stop it holds the constant 'today'"}},
		{q: "ALTER TABLE t ADD COLUMN a4 date DEFAULT ' Tomorrow '", want: []string{"stop it holds the constant 'tomorrow'"}},
		{q: "ALTER TABLE t ALTER COLUMN at SET DEFAULT 'yesterday'", want: []string{"stop it holds the constant 'yesterday'"}},
		{q: "ALTER TABLE t ADD COLUMN a5 timestamptz DEFAULT 'epoch'", want: []string{"apply ALTER TABLE t ADD COLUMN a5 timestamptz DEFAULT 'epoch'"}},
		{q: "ALTER TABLE t ADD COLUMN c1 ts_now", want: []string{"stop the default of public.t.c1 is evaluated once"}},
		{q: "ALTER TABLE t ADD COLUMN c2 float_rand", want: []string{"stop it fills public.t.c2 row by row", "apply ALTER TABLE t ADD COLUMN c2 float_rand"}},
		{q: "ALTER TABLE t ADD COLUMN c3 int_seven", want: []string{"apply ALTER TABLE t ADD COLUMN c3 int_seven"}},
		{q: "ALTER TABLE t ADD COLUMN r float8 DEFAULT random()", want: []string{"stop it fills public.t.r row by row", "apply ALTER TABLE t ADD COLUMN r float8 DEFAULT random()"}},
		{q: "ALTER TABLE s ADD COLUMN n serial", want: []string{"stop it fills public.s.n row by row", "apply ALTER TABLE s ADD COLUMN n serial"}},
		{q: "ALTER TABLE t ADD COLUMN ident int GENERATED ALWAYS AS IDENTITY", want: []string{"stop it fills public.t.ident row by row", "apply ALTER TABLE t ADD COLUMN ident int GENERATED ALWAYS AS IDENTITY"}},
		{q: "ALTER TABLE t ADD COLUMN z int DEFAULT 7", want: []string{"apply ALTER TABLE t ADD COLUMN z int DEFAULT 7"}},
		// The torture run, seed 1001 round 61: a constant cast by an
		// immutable function (numeric's typmod) is the same on the target.
		{q: "ALTER TABLE t ADD COLUMN n1 numeric(10,2) DEFAULT 1.5", want: []string{"apply ALTER TABLE t ADD COLUMN n1 numeric(10,2) DEFAULT 1.5"}},
		{q: "ALTER TABLE t ADD COLUMN n2 text DEFAULT upper('a')", want: []string{"apply ALTER TABLE t ADD COLUMN n2 text DEFAULT upper('a')"}},
		{q: "ALTER TABLE t ADD COLUMN n3 timestamptz DEFAULT now() + interval '1 day'", want: []string{"stop the default of public.t.n3 is evaluated once"}},
		{q: "ALTER TABLE t ADD COLUMN n4 text DEFAULT current_user", want: []string{"stop the default of public.t.n4 is evaluated once"}},
		// Finish's handover mark (seed 1001 round 59) is pgsprint's own.
		{q: "SET pgsprint.capture = off", want: nil},
		{q: "COMMENT ON TABLE t IS 'handover'", want: nil},
		{q: "RESET pgsprint.capture", want: nil},
		{q: "ALTER TABLE t ALTER COLUMN z TYPE bigint USING z * 2", want: []string{"apply ALTER TABLE t ALTER COLUMN z TYPE bigint USING z * 2"}},
		{q: "CREATE TABLE fresh (id int PRIMARY KEY, at timestamptz DEFAULT now())", want: []string{"apply CREATE TABLE fresh (id int PRIMARY KEY, at timestamptz DEFAULT now())"}},
		// Item 6: several statements in one string, E'' strings.
		{q: `COMMENT ON TABLE t IS E'it\'s'; INSERT INTO t (id) VALUES (1000); SELECT 'x'`, want: []string{"stop it runs inside a function, procedure or DO block, or in one query string with other statements"}},
		{q: `COMMENT ON TABLE t IS E'a\'; b'`, want: []string{`apply COMMENT ON TABLE t IS E'a\'; b'`}},
		{q: "COMMENT ON TABLE t IS 'a; b' -- c; d\n", want: []string{"apply COMMENT ON TABLE t IS 'a; b'"}},
		{q: "COMMENT ON TABLE t IS 'now'", want: []string{"apply COMMENT ON TABLE t IS 'now'"}},
		{q: "ALTER TABLE t ADD COLUMN m1 int; ALTER TABLE t ADD COLUMN m2 int", want: []string{"stop it runs inside", "stop it runs inside"}},
		{q: "SET search_path = public; CREATE TABLE sp (id int)", want: []string{"stop it runs inside"}},
		{q: "DO $$ BEGIN EXECUTE 'CREATE TABLE in_do (id int)'; END $$", want: []string{"stop it runs inside"}},
		{q: "CREATE TABLE copied AS SELECT * FROM t", want: []string{"stop it creates a table with rows"}},
		// Replayed as written.
		{q: "CREATE FUNCTION f1() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$", want: []string{"apply CREATE FUNCTION f1() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$"}},
		{q: "CREATE FUNCTION f2() RETURNS int LANGUAGE plpgsql AS $f1$ BEGIN RETURN 1; END $f1$", want: []string{"apply CREATE FUNCTION f2() RETURNS int LANGUAGE plpgsql AS $f1$ BEGIN RETURN 1; END $f1$"}},
		{q: "CREATE FUNCTION f3() RETURNS text LANGUAGE sql AS 'SELECT ''a;b'''", want: []string{"apply CREATE FUNCTION f3() RETURNS text LANGUAGE sql AS 'SELECT ''a;b'''"}},
		{q: `CREATE TABLE "semi;colon" (id int PRIMARY KEY, "a""b;" text)`, want: []string{`apply CREATE TABLE "semi;colon" (id int PRIMARY KEY, "a""b;" text)`}},
		{q: "CREATE VIEW tv AS SELECT id FROM t WHERE v <> 'x;y'", want: []string{"apply CREATE VIEW tv AS SELECT id FROM t WHERE v <> 'x;y'"}},
		{q: "create index concurrently t_lower on t (lower(v))", want: []string{"apply create index  t_lower on t (lower(v))"}},
		{q: "GRANT SELECT ON t TO PUBLIC", want: []string{"apply GRANT SELECT ON t TO PUBLIC"}},
		{q: "CREATE TABLE u (id int);  \n", want: []string{"apply CREATE TABLE u (id int)"}},
		{q: "DROP TABLE u, copied", want: []string{"apply DROP TABLE u, copied"}},
		{q: `ALTER TABLE t RENAME COLUMN v TO "v;2"`, want: []string{`apply ALTER TABLE t RENAME COLUMN v TO "v;2"`}},
	}
	if c.Version() < 14 {
		cases = slices.DeleteFunc(cases, func(tc struct {
			q     string
			fails string
			want  []string
		}) bool {
			return strings.Contains(tc.q, "DETACH PARTITION p2 CONCURRENTLY")
		})
	}
	seen := 0
	withConn(t, cfg, func(ctx context.Context, conn *pgx.Conn) {
		for _, tc := range cases {
			_, err := conn.Exec(ctx, tc.q)
			switch {
			case tc.fails == "" && err != nil:
				t.Fatalf("%s: %v", tc.q, err)
			case tc.fails != "" && (err == nil || !strings.Contains(err.Error(), tc.fails)):
				t.Fatalf("%s: %v, want an error with %q", tc.q, err, tc.fails)
			}
			r, err := conn.Query(ctx, "SELECT action || ' ' || CASE WHEN action = 'apply' THEN command ELSE reason END FROM "+table+" ORDER BY xid, n OFFSET $1", seen)
			var rows []string
			if err == nil {
				rows, err = pgx.CollectRows(r, pgx.RowTo[string])
			}
			if err != nil {
				t.Fatal(err)
			}
			seen += len(rows)
			ok := len(rows) == len(tc.want)
			for i := range rows {
				ok = ok && i < len(tc.want) && (rows[i] == tc.want[i] || strings.HasPrefix(tc.want[i], "stop ") && strings.HasPrefix(rows[i], tc.want[i]))
			}
			if !ok {
				t.Errorf("%s: recorded %q, want %q", tc.q, rows, tc.want)
			}
		}
	})
	if len(cases) < 40 {
		t.Errorf("%d statements, want at least 40", len(cases))
	}
}

// TestDDLSplitRandom: query strings assembled at random from statements
// holding every kind of token the lexer skips (semicolons inside each)
// split back into exactly those statements. PGSPRINT_DDL_SEED replays a
// run.
func TestDDLSplitRandom(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PGSPRINT_DDL_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PGSPRINT_DDL_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	c := sharedLogical(t)
	cfg, n := captureOnly(t, c, "SELECT 1")
	// Tokens of a statement: none ends it; separators go between them.
	tokens := []string{"SELECT", "a$b", "x1", "(", ")", ",", "'a;b'", "'it''s;'", `E'\';'`, `e'\\'`, `"q;""x"`,
		"$$;$$", "$t1$ ; $t$ $t1$", "$é$;$é$", "$1", "::int", "U&'\\0061;'", "é", "1e5"}
	seps := []string{" ", "\n", "\t", " /* ; */ ", "/* a /* ; */ b */", " -- ; c\n"}
	withConn(t, cfg, func(ctx context.Context, conn *pgx.Conn) {
		for round := 0; round < 200; round++ {
			var want []string
			var q strings.Builder
			for s := rng.IntN(4); s >= 0; s-- {
				var st strings.Builder
				for k := 1 + rng.IntN(6); k > 0; k-- {
					if st.Len() > 0 {
						st.WriteString(seps[rng.IntN(len(seps))])
					}
					st.WriteString(tokens[rng.IntN(len(tokens))])
				}
				want = append(want, st.String())
				q.WriteString(seps[rng.IntN(len(seps))] + st.String() + seps[rng.IntN(len(seps))] + ";")
			}
			r, err := conn.Query(ctx, "SELECT stmt FROM "+captureNames(n.Slot).split+"($1, true)", q.String())
			var got []string
			if err == nil {
				got, err = pgx.CollectRows(r, pgx.RowTo[string])
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: split(%q) = %q, want %q", round, q.String(), got, want)
			}
		}
	})
}
