package content_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/compare/content"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// contentSQL is the source of TestContentDiff: a keyed table with a
// column masked, a table keyed by a masked column, and a keyless one.
const contentSQL = `
CREATE TABLE t (id int PRIMARY KEY, a text, b text, at timestamptz);
INSERT INTO t SELECT i, 'a' || i, 'secret ' || i, timestamptz '2026-01-01 00:00+00' + i * interval '1 hour' FROM generate_series(1, 50) i;
CREATE TABLE byemail (email text PRIMARY KEY, n int);
INSERT INTO byemail SELECT 'u' || i || '@corp.example.org', i FROM generate_series(1, 20) i;
CREATE TABLE nokey (x int, y text);
INSERT INTO nokey SELECT i % 5, 'y' || i FROM generate_series(1, 30) i;
`

// contentSecret keys the masking of TestContentDiff's copies.
const contentSecret = "content secret"

// contentMask is the masking of TestContentDiff's masked copies.
var contentMask = &archive.Mask{Columns: []archive.MaskColumn{
	{Schema: "public", Table: "t", Column: "b", Rule: "text"},
	{Schema: "public", Table: "byemail", Column: "email", Rule: "email"},
	{Schema: "public", Table: "nokey", Column: "y", Rule: "hash:16"},
}}

// TestContentDiff makes development copies of one source, each from its
// rows (a subset: some rows left out; masked: through internal/mask with
// the rules recorded in contentMask), tampers with some, and checks that
// ContentDiff finds exactly the tampered tables, naming a key, and nothing
// in the untampered copies. A count-only compare (main before issue 42)
// sees none of the tampering: every copy holds as many rows (or fewer,
// for a subset) as it would untampered.
func TestContentDiff(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := pgtest.DB(t, c, "content src")
	if err := c.Exec(ctx, src, contentSQL); err != nil {
		t.Fatal(err)
	}
	srcCfg := config(t, c.ConnString(src))
	tables := []string{"public.t", "public.byemail", "public.nokey"}
	for _, tc := range []struct {
		name    string
		subset  bool
		masked  bool
		secret  bool
		tamper  string
		want    string // "table: first" of the one mismatch, "" for none
		wantNot string
	}{
		{name: "subset", subset: true},
		{name: "subset, row inserted", subset: true, tamper: "INSERT INTO t VALUES (1000, 'x', 'y', now())",
			want: `public.t: row ("id")=(1000) is only in the copy`},
		{name: "subset, value changed", subset: true, tamper: "UPDATE t SET a = 'changed' WHERE id = 2",
			want: `public.t: row ("id")=(2): columns "a" differ`},
		{name: "subset, keyless row duplicated", subset: true, tamper: "INSERT INTO nokey VALUES (2, 'y2'), (2, 'y2')",
			want: `public.nokey: row (2,y2) of ("x", "y") is only in the copy`},
		{name: "whole, row deleted", tamper: "DELETE FROM t WHERE id = 7",
			want: `public.t: row ("id")=(7) is missing from the copy`},
		{name: "masked", masked: true},
		{name: "masked, secret", masked: true, secret: true},
		{name: "masked, unmasked column changed", masked: true, tamper: "UPDATE t SET a = 'changed' WHERE id = 3",
			want: `public.t: row ("id")=(3): columns "a" differ`},
		{name: "masked, masked column changed, no secret", masked: true, tamper: "UPDATE t SET b = 'changed' WHERE id = 3"},
		{name: "masked, masked column changed, secret", masked: true, secret: true, tamper: "UPDATE t SET b = 'changed' WHERE id = 3",
			want: `public.t: row ("id")=(3): columns "b" differ`, wantNot: "changed"},
		{name: "masked key, other column changed", masked: true, secret: true, tamper: "UPDATE byemail SET n = 99 WHERE n = 4",
			want: `public.byemail: row (4) of ("n") is missing from the copy`},
		{name: "masked, keyless row inserted", masked: true, tamper: "INSERT INTO nokey VALUES (1, 'z')",
			want: `public.nokey: row (1) of ("x") is only in the copy`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := pgtest.DB(t, c, "content dst")
			if err := c.Exec(ctx, dst, strings.Split(contentSQL, "INSERT")[0]+
				"CREATE TABLE byemail (email text PRIMARY KEY, n int); CREATE TABLE nokey (x int, y text);"); err != nil {
				t.Fatal(err)
			}
			o := content.Options{Subset: tc.subset}
			if tc.masked {
				o.Mask = contentMask
			}
			if tc.secret {
				o.Secret = []byte(contentSecret)
			}
			where := ""
			if tc.subset {
				where = " WHERE r::text NOT LIKE '(1%'"
			}
			copyRows(ctx, t, c.ConnString(src), c.ConnString(dst), tc.masked, where)
			if tc.tamper != "" {
				if err := c.Exec(ctx, dst, tc.tamper); err != nil {
					t.Fatal(err)
				}
			}
			got, err := content.Diff(ctx, srcCfg, config(t, c.ConnString(dst)), tables, o)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, m := range got {
				lines = append(lines, m.Table+": "+m.First)
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("differences in an untampered copy: %q", lines)
			case tc.want != "" && (len(got) != 1 || lines[0] != tc.want):
				t.Errorf("got %q, want [%q]", lines, tc.want)
			case tc.wantNot != "" && strings.Contains(strings.Join(lines, " "), tc.wantNot):
				t.Errorf("a masked column's value is printed: %q", lines)
			}
		})
	}
}

// config parses a test connection string.
func config(t *testing.T, conn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// copyRows copies the rows (those where chooses, of the keyed table t
// and the keyless one) of TestContentDiff's tables from src to dst,
// masked as contentMask says when masked, through internal/mask as dump
// masks them.
func copyRows(ctx context.Context, t *testing.T, src, dst string, masked bool, where string) {
	t.Helper()
	sc, err := pgx.Connect(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	dc, err := pgx.Connect(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close(ctx)
	var plan *mask.Resolved
	if masked {
		tx, err := sc.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		spec := mask.Spec{Secret: []byte(contentSecret)}
		for _, mc := range contentMask.Columns {
			r, err := mask.ParseRule(mc.Rule)
			if err != nil {
				t.Fatal(err)
			}
			r.Schema, r.Table, r.Column = mc.Schema, mc.Table, mc.Column
			spec.Rules = append(spec.Rules, r)
		}
		if plan, err = mask.Resolve(ctx, sc, spec, "UTF8"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tb := range []struct {
		name string
		cols []string
	}{{"t", []string{"id", "a", "b", "at"}}, {"byemail", []string{"email", "n"}}, {"nokey", []string{"x", "y"}}} {
		var buf bytes.Buffer
		var w io.Writer = &buf
		if mt := plan.Table("public", tb.name, tb.cols); mt != nil {
			w = mt.Writer(&buf)
		}
		if _, err := sc.PgConn().CopyTo(ctx, w, "COPY (SELECT * FROM "+tb.name+" r"+where+") TO STDOUT"); err != nil {
			t.Fatal(err)
		}
		if _, err := dc.PgConn().CopyFrom(ctx, &buf, "COPY "+tb.name+" FROM STDIN"); err != nil {
			t.Fatal(err)
		}
	}
}
