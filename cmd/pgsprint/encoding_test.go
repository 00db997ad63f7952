package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// encodingCase is one server encoding of the matrix: word goes into every
// kind of name (schema, table, column, index, constraint, enum label),
// text into values (plain, TOASTed, array, JSON, comment, large object).
// Both are Go (UTF8) strings the server converts, except for SQL_ASCII,
// whose bytes are stored as sent and include bytes invalid in UTF8.
type encodingCase struct {
	enc  string
	word string
	text string
}

var encodingCases = []encodingCase{
	{"UTF8", "\u00fcn\u00ef\u65e5", "\u20ac \u65e5\u672c\u8a9e cr\u00e8me \U0001F600"},
	{"LATIN1", "caf\u00e9", "cr\u00e8me br\u00fbl\u00e9e \u00ff"},
	{"WIN1252", "\u0153uvre", "\u20ac\u0153\u2019 \u00e9t\u00e9"},
	{"ISO_8859_5", "\u0436\u0443\u0440\u043d\u0430\u043b", "\u043f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440"},
	{"EUC_JP", "\u65e5\u672c", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8"},
	{"SQL_ASCII", "caf\xe9", "cr\xe8me \xff\xfe \u65e5\u672c"},
}

// everyPathUnderTest are the encodings whose pipe, clone and --to-sql
// paths `make test` runs (every encoding's under `make test-long`): a
// single-byte one, a multi-byte one that is not UTF8, and SQL_ASCII, whose
// bytes are not checked. UTF8 takes those paths in most other tests.
var everyPathUnderTest = map[string]bool{"LATIN1": true, "EUC_JP": true, "SQL_ASCII": true}

// encodingSQL is the source database of one encoding: {W} is the case's
// word, {V} its text.
const encodingSQL = `
CREATE SCHEMA "s_{W}";
CREATE TYPE "s_{W}"."e_{W}" AS ENUM ('plain', '{W}');
CREATE TABLE "s_{W}"."t_{W}" (
	id int PRIMARY KEY,
	"c_{W}" text NOT NULL CONSTRAINT "ck_{W}" CHECK ("c_{W}" <> ''),
	arr text[], j jsonb, js json, e "s_{W}"."e_{W}", big text);
COMMENT ON TABLE "s_{W}"."t_{W}" IS 'comment {V}';
COMMENT ON COLUMN "s_{W}"."t_{W}"."c_{W}" IS '{W}';
CREATE INDEX "i_{W}" ON "s_{W}"."t_{W}" ("c_{W}");
INSERT INTO "s_{W}"."t_{W}" VALUES
	(1, '{V}', ARRAY['{V}', '{W}'], jsonb_build_object('k', '{V}'), json_build_object('{W}', '{V}'), '{W}',
	 (SELECT string_agg(md5(i::text) || '{V}', '') FROM generate_series(1, 400) i)),
	(2, 'plain', NULL, NULL, NULL, 'plain', NULL);
CREATE TABLE public."{W}" (id int PRIMARY KEY, v text);
INSERT INTO public."{W}" VALUES (1, '{V}');
CREATE TABLE public.other (id int);
INSERT INTO public.other VALUES (1);
SELECT lo_from_bytea(0, convert_to('{V}', current_setting('server_encoding')));
`

// createEncodedDB creates database name in encoding enc with locale C (so
// that databases of every encoding can live in one cluster).
func createEncodedDB(t testing.TB, c *pgtest.Instance, name, enc string) {
	t.Helper()
	err := c.Exec(context.Background(), "postgres", fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0 ENCODING %s LC_COLLATE 'C' LC_CTYPE 'C'", pg.Ident(name), pg.Literal(enc)))
	if err != nil {
		t.Fatal(err)
	}
}

// clientConn connects to db with client_encoding enc, so that the test's
// own text is converted by the server (UTF8) or stored as sent (SQL_ASCII).
func clientConn(t testing.TB, c *pgtest.Instance, db, enc string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.ConnString(db)+" client_encoding="+enc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// loadEncodingCase creates database db of tc's encoding holding tc's
// words and text.
func loadEncodingCase(t testing.TB, c *pgtest.Instance, db string, tc encodingCase) {
	t.Helper()
	createEncodedDB(t, c, db, tc.enc)
	client := "UTF8"
	if tc.enc == "SQL_ASCII" {
		client = "SQL_ASCII"
	}
	sql := strings.NewReplacer("{W}", tc.word, "{V}", tc.text).Replace(encodingSQL)
	if _, err := clientConn(t, c, db, client).PgConn().Exec(context.Background(), sql).ReadAll(); err != nil {
		t.Fatalf("load %s database: %v", tc.enc, err)
	}
}

// requireSameEncoded compares two databases as pg_dump's schema read in
// UTF8 and pgsprint compare (per-table row hashes computed in UTF8).
func requireSameEncoded(t *testing.T, acrossVersions bool, binDir, src, dst string) {
	t.Helper()
	if acrossVersions {
		pgtest.RequireSameSchemaAcrossVersions(t, binDir, src, dst)
	} else {
		pgtest.RequireSameSchema(t, binDir, src, dst)
	}
	if r := pgsprint(t, nil, "compare", "--source", src, "--target", dst, "-j", "2"); r.code != 0 {
		t.Fatalf("compare: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// requireNoReplacement fails if s holds U+FFFD, the mark of text decoded in
// the wrong encoding.
func requireNoReplacement(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, "\uFFFD") { // bytewise: invalid UTF8 is no U+FFFD
		t.Fatalf("%s holds U+FFFD:\n%s", what, s)
	}
}

// TestEncodingMatrix dumps a database of every server encoding, with
// non-ASCII text in names, values, TOASTed values, arrays, JSON, enum
// labels, comments and a large object, and restores it through a file, a
// pipe, clone and --to-sql | psql, into a database of the same encoding
// and into UTF8 (clone into UTF8). A SQL_ASCII source with bytes invalid
// in UTF8 cannot go into UTF8 (pg_restore cannot either): the restore is
// refused up front, and its clone goes into SQL_ASCII.
func TestEncodingMatrix(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t)
	runEncodingMatrix(t, c, c, true)
}

// runEncodingMatrix runs the matrix with sources in cluster sc and targets
// in cluster tc; full adds the pipe, clone and --to-sql paths.
func runEncodingMatrix(t *testing.T, sc, tc *pgtest.Instance, full bool) {
	dir := t.TempDir()
	bin := tc.BinDir()
	across := sc.Version() != tc.Version()
	if sc.Version() > tc.Version() {
		bin = sc.BinDir()
	}
	for _, ec := range encodingCases {
		t.Run(ec.enc, func(t *testing.T) {
			src := "src_" + strings.ToLower(ec.enc)
			loadEncodingCase(t, sc, src, ec)
			srcConn := sc.ConnString(src)
			file := filepath.Join(dir, src+".pgs")
			mustPgsprint(t, "dump", "-d", srcConn, "-f", file, "-j", "2", "-q")
			list := mustPgsprint(t, "list", file).stdout
			requireNoReplacement(t, "list", list)
			requireNoReplacement(t, "list --json", mustPgsprint(t, "list", "--json", file).stdout)
			if ec.enc != "SQL_ASCII" && !strings.Contains(list, ec.word) {
				t.Fatalf("list does not name %q:\n%s", ec.word, list)
			}

			same := src + "_same"
			createEncodedDB(t, tc, same, ec.enc)
			mustPgsprint(t, "restore", "-f", file, "-d", tc.ConnString(same), "-j", "2", "-q")
			requireSameEncoded(t, across, bin, srcConn, tc.ConnString(same))

			utf := src + "_utf8"
			createEncodedDB(t, tc, utf, "UTF8")
			r := pgsprint(t, nil, "restore", "-f", file, "-d", tc.ConnString(utf), "-j", "2", "-q")
			// UTF8 holds every encoding's text but a SQL_ASCII
			// database's bytes that are not UTF8, which go into
			// SQL_ASCII only (as with pg_restore).
			wide := "UTF8"
			if ec.enc == "SQL_ASCII" {
				requireEncodingRefusal(t, r, "SQL_ASCII", "UTF8")
				wide = "SQL_ASCII"
			} else {
				if r.code != 0 {
					t.Fatalf("restore into UTF8: exit %d\n%s", r.code, r.stderr)
				}
				requireSameEncoded(t, across, bin, srcConn, tc.ConnString(utf))
			}
			if !full || !(long || everyPathUnderTest[ec.enc]) {
				return
			}

			pipe := src + "_pipe"
			createEncodedDB(t, tc, pipe, ec.enc)
			for i, res := range runPipeline(t,
				[]string{"pgsprint", "dump", "-d", srcConn, "-f", "-", "-q"},
				[]string{"pgsprint", "restore", "-f", "-", "-d", tc.ConnString(pipe), "-j", "2", "-q"}) {
				if res.code != 0 {
					t.Fatalf("pipeline command %d: exit %d\n%s", i, res.code, res.stderr)
				}
			}
			requireSameEncoded(t, across, bin, srcConn, tc.ConnString(pipe))

			clone := src + "_clone"
			createEncodedDB(t, tc, clone, wide)
			mustPgsprint(t, "clone", "--source", srcConn, "--target", tc.ConnString(clone), "-j", "2", "-q")
			requireSameEncoded(t, across, bin, srcConn, tc.ConnString(clone))

			script := filepath.Join(dir, src+".sql")
			if err := os.WriteFile(script, []byte(mustPgsprint(t, "restore", "-f", file, "--to-sql").stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			sqlDB := src + "_sql"
			createEncodedDB(t, tc, sqlDB, ec.enc)
			out, err := exec.Command(filepath.Join(tc.BinDir(), "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
				"-d", tc.ConnString(sqlDB), "-f", script).CombinedOutput()
			if err != nil {
				t.Fatalf("psql: %v\n%s", err, out)
			}
			requireSameEncoded(t, across, bin, srcConn, tc.ConnString(sqlDB))

			// A filter naming the non-ASCII table picks it and only it.
			filtered := src + "_t"
			createEncodedDB(t, tc, filtered, ec.enc)
			mustPgsprint(t, "restore", "-f", file, "-d", tc.ConnString(filtered), "-t", ec.word, "-q")
			want := pgtest.SchemaDump(t, bin, srcConn, "-t", pg.Qualified("public", ec.word))
			got := pgtest.SchemaDump(t, bin, tc.ConnString(filtered))
			if want != got {
				t.Fatalf("restore -t %q: schema differs from pg_dump -t:\n--- want\n%s\n--- got\n%s", ec.word, want, got)
			}
		})
	}
}

// requireEncodingRefusal checks that a restore failed with one line naming
// both encodings.
func requireEncodingRefusal(t *testing.T, r result, from, to string) {
	t.Helper()
	msg := strings.TrimSpace(r.stderr)
	if r.code != 1 || strings.Count(msg, "\n") > 0 || !strings.Contains(msg, from) || !strings.Contains(msg, to) {
		t.Fatalf("want a one-line refusal naming %s and %s with exit 1, got exit %d:\n%s", from, to, r.code, r.stderr)
	}
	t.Log(msg)
}

// TestEncodingMatrixOtherVersion runs the matrix (file paths only) with
// sources on the oldest other major version installed, restored into
// PostgreSQL 15.
func TestEncodingMatrixOtherVersion(t *testing.T) {
	t.Parallel()
	versions := versionsOrSkip(t, 2)
	other := versions[0]
	if other == 15 {
		other = versions[len(versions)-1]
	}
	dir, err := pgtest.BinDirFor(other)
	if err != nil {
		t.Fatal(err)
	}
	runEncodingMatrix(t, pgtest.New(t, pgtest.Options{BinDir: dir}), pgtest.New(t), false)
}

// TestEncodingConversions restores a LATIN1 database's UTF8 copy into
// LATIN1 (the text fits), refuses UTF8 text LATIN1 cannot hold with one
// line naming the table and both encodings, resumes a killed restore of
// the LATIN1 archive, and has compare find one changed accented
// character across encodings.
func TestEncodingConversions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	dir := t.TempDir()
	latin := encodingCases[1]
	loadEncodingCase(t, c, "latin", latin)
	latinFile := filepath.Join(dir, "latin.pgs")
	mustPgsprint(t, "dump", "-d", c.ConnString("latin"), "-f", latinFile, "-q")
	createEncodedDB(t, c, "utf", "UTF8")
	mustPgsprint(t, "restore", "-f", latinFile, "-d", c.ConnString("utf"), "-q")

	t.Run("UTF8 into LATIN1 when it fits", func(t *testing.T) {
		file := filepath.Join(dir, "utf.pgs")
		mustPgsprint(t, "dump", "-d", c.ConnString("utf"), "-f", file, "-q")
		createEncodedDB(t, c, "back", "LATIN1")
		mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("back"), "-q")
		requireSameEncoded(t, false, c.BinDir(), c.ConnString("latin"), c.ConnString("back"))
	})

	t.Run("UTF8 names LATIN1 lacks are refused before loading", func(t *testing.T) {
		createEncodedDB(t, c, "wide", "UTF8")
		if err := c.Exec(ctx, "wide", "CREATE TABLE \"\u20ac\" (v text); INSERT INTO \"\u20ac\" VALUES ('x')"); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "wide.pgs")
		mustPgsprint(t, "dump", "-d", c.ConnString("wide"), "-f", file, "-q")
		createEncodedDB(t, c, "narrow", "LATIN1")
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString("narrow"), "-q")
		requireEncodingRefusal(t, r, "UTF8", "LATIN1")
		if !strings.Contains(r.stderr, "\u20ac") {
			t.Errorf("the refusal does not name the table:\n%s", r.stderr)
		}
		var n int
		if err := clientConn(t, c, "narrow", "UTF8").QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the refused restore created %d relations (%v)", n, err)
		}
	})

	t.Run("UTF8 values LATIN1 lacks fail naming the table", func(t *testing.T) {
		createEncodedDB(t, c, "wideval", "UTF8")
		if err := c.Exec(ctx, "wideval", "CREATE TABLE \"caf\u00e9\" (v text); INSERT INTO \"caf\u00e9\" VALUES ('\u20ac')"); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "wideval.pgs")
		mustPgsprint(t, "dump", "-d", c.ConnString("wideval"), "-f", file, "-q")
		createEncodedDB(t, c, "narrowval", "LATIN1")
		r := pgsprint(t, nil, "restore", "-f", file, "-d", c.ConnString("narrowval"), "-q")
		requireEncodingRefusal(t, r, "UTF8", "LATIN1")
		if !strings.Contains(r.stderr, "caf\u00e9") {
			t.Errorf("the failure does not name the table:\n%s", r.stderr)
		}
	})

	t.Run("dump -t naming a non-ASCII table", func(t *testing.T) {
		file := filepath.Join(dir, "one.pgs")
		mustPgsprint(t, "dump", "-d", c.ConnString("latin"), "-t", latin.word, "-f", file, "-q")
		list := mustPgsprint(t, "list", file).stdout
		if !strings.Contains(list, pg.Qualified("public", latin.word)) || !strings.Contains(list, "1 tables") {
			t.Fatalf("dump -t %q did not pick that table alone:\n%s", latin.word, list)
		}
	})

	t.Run("resume after a kill", func(t *testing.T) {
		createEncodedDB(t, c, "resumed", "LATIN1")
		target := clientConn(t, c, "resumed", "UTF8")
		args := []string{"restore", "-f", latinFile, "-d", c.ConnString("resumed"), "-j", "1"}
		cmd, stderr := startPgsprint(t, args...)
		deadline := time.Now().Add(time.Minute)
		for !journalHas(target, "load stream%") && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
		if cmd.ProcessState.Success() {
			t.Skipf("the restore ended before it could be killed: %s", stderr)
		}
		mustPgsprint(t, append(args, "--resume", "-q")...)
		requireSameEncoded(t, false, c.BinDir(), c.ConnString("latin"), c.ConnString("resumed"))
	})

	t.Run("compare finds a changed accented character", func(t *testing.T) {
		if err := clientConn(t, c, "utf", "UTF8").QueryRow(ctx, "SELECT 1").Scan(new(int)); err != nil {
			t.Fatal(err)
		}
		if _, err := clientConn(t, c, "utf", "UTF8").Exec(ctx, "UPDATE public.\"caf\u00e9\" SET v = replace(v, '\u00e8', '\u00e9')"); err != nil {
			t.Fatal(err)
		}
		r := pgsprint(t, nil, "compare", "--source", c.ConnString("latin"), "--target", c.ConnString("utf"))
		if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "caf\u00e9") {
			t.Fatalf("compare after changing one character: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		requireNoReplacement(t, "compare", r.stdout+r.stderr)
	})
}
