package pgtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// EncodingCase is one server encoding of the matrix: word goes into every
// kind of name (schema, table, column, index, constraint, enum label),
// text into values (plain, TOASTed, array, JSON, comment, large object).
// Both are Go (UTF8) strings the server converts, except for SQL_ASCII,
// whose bytes are stored as sent and include bytes invalid in UTF8.
type EncodingCase struct {
	Enc  string
	Word string
	Text string
}

// EncodingCases are the encodings the encoding tests (restore's and the
// binary's) run, UTF8 first and LATIN1 second.
var EncodingCases = []EncodingCase{
	{"UTF8", "\u00fcn\u00ef\u65e5", "\u20ac \u65e5\u672c\u8a9e cr\u00e8me \U0001F600"},
	{"LATIN1", "caf\u00e9", "cr\u00e8me br\u00fbl\u00e9e \u00ff"},
	{"WIN1252", "\u0153uvre", "\u20ac\u0153\u2019 \u00e9t\u00e9"},
	{"ISO_8859_5", "\u0436\u0443\u0440\u043d\u0430\u043b", "\u043f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440"},
	{"EUC_JP", "\u65e5\u672c", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8"},
	{"SQL_ASCII", "caf\xe9", "cr\xe8me \xff\xfe \u65e5\u672c"},
}

// EveryPathUnderTest says whether `make test` takes encoding enc through
// every path of the encoding tests (`make test-long` takes each of
// EncodingCases): a single-byte one (LATIN1), a multi-byte one that is not
// UTF8 (EUC_JP), and SQL_ASCII, whose bytes are not checked. UTF8 takes
// those paths in most other tests; WIN1252 and ISO_8859_5 are single-byte
// as LATIN1 is.
func EveryPathUnderTest(enc string) bool {
	switch enc {
	case "LATIN1", "EUC_JP", "SQL_ASCII":
		return true
	}
	return Long
}

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

// CreateEncodedDB creates database name in encoding enc with locale C (so
// that databases of every encoding can live in one cluster).
func CreateEncodedDB(t testing.TB, c *Instance, name, enc string) {
	t.Helper()
	err := c.Exec(context.Background(), "postgres", fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0 ENCODING %s LC_COLLATE 'C' LC_CTYPE 'C'", pg.Ident(name), pg.Literal(enc)))
	if err != nil {
		t.Fatal(err)
	}
}

// ClientConn connects to db with client_encoding enc, so that the test's
// own text is converted by the server (UTF8) or stored as sent (SQL_ASCII).
func ClientConn(t testing.TB, c *Instance, db, enc string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.ConnString(db)+" client_encoding="+enc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// LoadEncodingCase creates database db of tc's encoding holding tc's
// words and text.
func LoadEncodingCase(t testing.TB, c *Instance, db string, tc EncodingCase) {
	t.Helper()
	CreateEncodedDB(t, c, db, tc.Enc)
	client := "UTF8"
	if tc.Enc == "SQL_ASCII" {
		client = "SQL_ASCII"
	}
	sql := strings.NewReplacer("{W}", tc.Word, "{V}", tc.Text).Replace(encodingSQL)
	if _, err := ClientConn(t, c, db, client).PgConn().Exec(context.Background(), sql).ReadAll(); err != nil {
		t.Fatalf("load %s database: %v", tc.Enc, err)
	}
}
