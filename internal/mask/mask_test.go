package mask

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in                    string
		schema, table, column string
		kind                  string
		err                   string
	}{
		{in: "app.users.email=email", schema: "app", table: "users", column: "email", kind: Email},
		{in: `"My App"."Users"."e=mail" = hash:16`, schema: "My App", table: "Users", column: "e=mail", kind: Hash},
		{in: "App.T.C=number:-5:5", schema: "app", table: "t", column: "c", kind: Number},
		{in: "a.b.c=const:x:y", schema: "a", table: "b", column: "c", kind: Const},
		{in: "a.b.c=regex:#[0-9]+#N#", schema: "a", table: "b", column: "c", kind: Regex},
		{in: "a.b.c=dateshift:0", err: "1 to 36500"},
		{in: "a.b.c=number:5:1", err: "MIN <= MAX"},
		{in: "a.b.c=hash:4", err: "from 8 to 64"},
		{in: "a.b.c=email:x", err: "takes no argument"},
		{in: "a.b.c=regex:/(/x/", err: "regex"},
		{in: "b.c=email", err: "three names"},
		{in: "a.b.c=shuffle", err: "unknown rule"},
		{in: "a.b.c", err: "want 'schema.table.column=RULE'"},
	}
	for _, tc := range tests {
		r, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.Schema != tc.schema || r.Table != tc.table || r.Column != tc.column || r.Kind != tc.kind {
			t.Errorf("%s: %+v %v", tc.in, r, err)
		}
	}
}

// table builds a Table masking columns (by index) with rules, on text
// columns of a UTF8 database.
func table(t *testing.T, secret string, columns int, rules map[int]string) *TableMask {
	t.Helper()
	tb := &TableMask{name: "t", columns: columns, secret: []byte(secret)}
	for i := 0; i < columns; i++ {
		text, ok := rules[i]
		if !ok {
			continue
		}
		r, err := ParseRule(text)
		if err != nil {
			t.Fatal(err)
		}
		cl := classText
		switch r.Kind {
		case Number:
			cl = classInt8
		case DateDays:
			cl = classDate
		}
		tb.masked = append(tb.masked, column{index: i, rule: r, class: cl, utf8: true})
	}
	return tb
}

func mask(t *testing.T, tb *TableMask, in string, piece int) string {
	t.Helper()
	var out bytes.Buffer
	w := tb.Writer(&out)
	b := []byte(in)
	for len(b) > 0 {
		n := min(piece, len(b))
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestWriter masks COPY text rows: the unmasked fields and NULLs are
// kept byte for byte, escapes are read and written back, the output does
// not depend on how the rows are cut into writes, is the same for the
// same value and secret (and differs for another secret), and keeps
// what each rule promises.
func TestWriter(t *testing.T) {
	rules := map[int]string{1: Email, 2: Text, 4: "dateshift:10", 5: "number:1:6", 6: Null, 7: "hash:16"}
	tb := table(t, "s3cret", 8, rules)
	in := "1\talice@corp.example.org\tline\\none\\\\two\\tthree é\tkeep\\\\me\t2024-02-29 13:14:15+01\t42\tx\tv\n" +
		"2\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\n" +
		"3\talice@corp.example.org\t\t\\N\tinfinity\t7\ty\tw\n"
	whole := mask(t, tb, in, len(in))
	if byByte := mask(t, tb, in, 1); byByte != whole {
		t.Fatalf("written a byte at a time:\n%q\nat once:\n%q", byByte, whole)
	}
	rows := strings.Split(strings.TrimSuffix(whole, "\n"), "\n")
	if len(rows) != 3 {
		t.Fatalf("%d rows: %q", len(rows), whole)
	}
	r1, r3 := strings.Split(rows[0], "\t"), strings.Split(rows[2], "\t")
	if r1[0] != "1" || r1[3] != `keep\\me` {
		t.Errorf("unmasked fields changed: %q", rows[0])
	}
	if !regexp.MustCompile(`^[a-z]+\.[a-z]+\.[0-9a-f]{16}@example\.com$`).MatchString(r1[1]) || r1[1] != r3[1] {
		t.Errorf("email: %q and %q", r1[1], r3[1])
	}
	if got := unescape(nil, []byte(r1[2])); utf8.RuneCount(got) != utf8.RuneCountInString("line\none\\two\tthree é") || bytes.Contains(got, []byte("line")) {
		t.Errorf("text %q: want as many characters, other words", got)
	}
	if !strings.HasSuffix(r1[4], " 13:14:15+01") || r1[4] == "2024-02-29 13:14:15+01" {
		t.Errorf("dateshift %q", r1[4])
	} else if d, err := time.Parse("2006-01-02", r1[4][:10]); err != nil || d.Sub(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)).Abs() > 10*24*time.Hour {
		t.Errorf("dateshift %q: more than 10 days", r1[4])
	}
	if r3[4] != "infinity" {
		t.Errorf("dateshift of infinity: %q", r3[4])
	}
	if r1[5] < "1" || r1[5] > "6" || len(r1[5]) != 1 {
		t.Errorf("number:1:6 gave %q", r1[5])
	}
	if r1[6] != `\N` || r3[6] != `\N` {
		t.Errorf("null: %q %q", r1[6], r3[6])
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(r1[7]) || r1[7] == r3[7] {
		t.Errorf("hash: %q %q", r1[7], r3[7])
	}
	if rows[1] != "2\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N\t\\N" {
		t.Errorf("NULLs did not stay NULL: %q", rows[1])
	}
	if r3[2] != "" {
		t.Errorf("text of the empty string: %q", r3[2])
	}
	if other := mask(t, table(t, "other", 8, rules), in, len(in)); other == whole {
		t.Error("another secret gave the same output")
	}
	var out bytes.Buffer
	two := table(t, "s", 2, map[int]string{1: Email})
	w := two.Writer(&out)
	if _, err := w.Write([]byte("1\ta\n2\tb")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Error("a row cut short was not reported")
	}
	if _, err := two.Writer(&out).Write([]byte("1\n")); err == nil {
		t.Error("a row with too few fields was not reported")
	}
}

// TestUnique masks 50,000 distinct values with the rules allowed on keys:
// no two outputs are equal; and phone, name and text keep their shapes.
func TestUnique(t *testing.T) {
	k := newKeyer([]byte("s"))
	for _, rule := range []string{Email, Hash, "hash:16"} {
		r, _ := ParseRule(rule)
		c := column{rule: r, class: classText, utf8: true}
		seen := map[string]bool{}
		for i := range 50000 {
			out, _ := c.apply(k, fmt.Appendf(nil, "user%d@corp.example.org", i), nil)
			if seen[string(out)] {
				t.Fatalf("%s: two values masked to %q", rule, out)
			}
			seen[string(out)] = true
		}
	}
	shapes := map[string]*regexp.Regexp{Phone: regexp.MustCompile(`^\+1-555-[0-9]{3}-[0-9]{4}$`), Name: regexp.MustCompile(`^[A-Z][a-z]+ [A-Z][a-z]+$`)}
	for rule, re := range shapes {
		r, _ := ParseRule(rule)
		c := column{rule: r, class: classText, utf8: true}
		for i := range 100 {
			if out, _ := c.apply(k, fmt.Appendf(nil, "%d", i), nil); !re.Match(out) {
				t.Errorf("%s gave %q", rule, out)
			}
		}
	}
	r, _ := ParseRule(Name)
	c := column{rule: r, class: classText, utf8: true, limit: 5}
	if out, _ := c.apply(k, []byte("x"), nil); len(out) != 5 {
		t.Errorf("name into varchar(5): %q", out)
	}
}

// TestMain stops the shared cluster (pgtest.Shared) once every test has
// run.
func TestMain(m *testing.M) { pgtest.Main(m) }

// TestResolve checks rules against MaskSQL's schema: a plan for good
// rules (partitions take their parent's), every problem named for bad
// ones; and mask check's warnings and sample rows.
func TestResolve(t *testing.T) {
	t.Parallel()
	c := pgtest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := pgtest.DB(t, c, "mask")
	if err := c.Exec(ctx, db, pgtest.MaskSQL()); err != nil {
		t.Fatal(err)
	}
	conn := connect(ctx, t, c, db)
	parse := func(lines ...string) Spec {
		spec := Spec{Secret: []byte("s")}
		for _, l := range lines {
			r, err := Parse(l)
			if err != nil {
				t.Fatal(err)
			}
			spec.Rules = append(spec.Rules, r)
		}
		return spec
	}
	good := parse(strings.Split(strings.TrimSpace(strings.SplitN(pgtest.MaskRules, "\n", 2)[1]), "\n")...)
	rep, err := Check(ctx, conn, good)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Errors)+len(rep.Warnings) > 0 {
		t.Errorf("the good rules: errors %q, warnings %q", rep.Errors, rep.Warnings)
	}
	if len(rep.Samples) == 0 || rep.Samples[0].Table != `"crm"."users"` || !strings.HasSuffix(rep.Samples[0].Before[0], pgtest.MaskDomain) || strings.Contains(rep.Samples[0].After[0], pgtest.MaskDomain) {
		t.Errorf("samples: %+v", rep.Samples)
	}
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		t.Fatal(err)
	}
	plan, err := Resolve(ctx, conn, good, "UTF8")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if plan.Table("crm", "events_2026", []string{"id", "at", "email"}) == nil || plan.Table("crm", "events", []string{"id", "at"}) != nil {
		t.Error("a partition does not take its parent's rule, or a table without the masked column got one")
	}
	bad := []struct {
		rules   []string
		want    string
		notWant string // a rule refused once is not called "not masked" by its foreign key
	}{
		{[]string{"crm.users.nope=email"}, `no column "nope"`, ""},
		{[]string{"crm.nope.x=email"}, `no table "crm"."nope"`, ""},
		{[]string{"crm.users.score=email"}, "rule email writes text, not integer", ""},
		{[]string{"crm.users.born=hash"}, "not date", ""},
		{[]string{"crm.users.id=number:1:10"}, `"crm"."users"."id": in a primary key or unique index: rule number:1:10 cannot keep it unique`, ""},
		{[]string{"crm.users.email=const:x", "crm.logins.user_email=const:x"}, "cannot keep it unique", "not masked"},
		{[]string{"crm.users.email=email"}, `foreign key "logins_user_email_fkey": "crm"."logins"."user_email" is not masked but "crm"."users"."email" is masked with email`, ""},
		{[]string{"crm.users.full_name=null", "crm.users.email=null"}, "rule null on a NOT NULL column", ""},
		{[]string{"crm.users.score=const:abc"}, "const value is not a integer", ""},
		{[]string{"crm.users.phone=hash:32"}, "hash:32 does not fit character varying(20)", ""},
		{[]string{"crm.users.score=number:1:99999999999"}, "does not fit integer", ""},
	}
	for _, tc := range bad {
		rep, err := Check(ctx, conn, parse(tc.rules...))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(rep.Errors, "\n"); !strings.Contains(got, tc.want) || (tc.notWant != "" && strings.Contains(got, tc.notWant)) {
			t.Errorf("%v: errors %q, want %q and not %q", tc.rules, rep.Errors, tc.want, tc.notWant)
		}
	}
	// A unique index on an expression of the column holds it too.
	if _, err := conn.Exec(ctx, "CREATE UNIQUE INDEX ON crm.users (lower(phone))"); err != nil {
		t.Fatal(err)
	}
	if rep, err = Check(ctx, conn, good); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(strings.Join(rep.Errors, "\n"), `"crm"."users"."phone": in a primary key or unique index: rule phone cannot keep it unique`) {
		t.Errorf("a unique index on lower(phone): errors %q", rep.Errors)
	}
	if _, err := conn.Exec(ctx, "DROP INDEX crm.users_lower_idx"); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(ctx, conn, parse("crm.users.email=email", "crm.logins.user_email=email"))
	if err != nil {
		t.Fatal(err)
	}
	warned := strings.Join(rep.Warnings, "\n")
	for _, want := range []string{`"crm"."users"."api_token" is not masked and its name`, `"crm"."users"."phone" is not masked`, `"crm"."events"."email" is not masked`} {
		if !strings.Contains(warned, want) {
			t.Errorf("warnings %q: want %q", rep.Warnings, want)
		}
	}
	// A column whose name says nothing, found by its values.
	// An e-mail inside a longer text or a jsonb, and an SSN (not a phone).
	if _, err := conn.Exec(ctx, `CREATE TABLE crm.misc (contact text, note text, payload jsonb, code text);
		INSERT INTO crm.misc VALUES ('jo@corp.example.org', 'write to jo@corp.example.org, not here', '{"to": "jo@corp.example.org"}', '078-05-1120')`); err != nil {
		t.Fatal(err)
	}
	if rep, err = Check(ctx, conn, good); err != nil {
		t.Fatal(err)
	}
	w := strings.Join(rep.Warnings, "\n")
	for _, want := range []string{
		`"crm"."misc"."contact" is not masked and its values look like e-mail addresses`,
		`"crm"."misc"."note" is not masked and its values look like text holding e-mail addresses`,
		`"crm"."misc"."payload" is not masked and its values look like text holding e-mail addresses`,
		`"crm"."misc"."code" is not masked and its values look like social security numbers`,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings %q: want %q", w, want)
		}
	}
	var refused *RefusedError
	if _, err := Resolve(ctx, conn, Spec{Rules: good.Rules}, "UTF8"); !errors.As(err, &refused) {
		t.Errorf("no secret: %v", err)
	}
	t.Run("LATIN1", func(t *testing.T) { latin1(t, c) })
}

// latin1 masks text in a LATIN1 database, read as the data path reads
// it (COPY in the server's encoding): characters are bytes there, the
// output is ASCII and fits a varchar(n), and loads back; regex, which
// reads UTF8, is refused.
func latin1(t *testing.T, c *pgtest.Instance) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	latin := pgtest.UniqueName("latin")
	if err := c.Exec(ctx, "postgres", "CREATE DATABASE "+latin+" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pgtest.DropDB(t, c, latin) })
	if err := c.Exec(ctx, latin, "CREATE TABLE t (s varchar(3), n text); INSERT INTO t VALUES ('été', 'naïve café')"); err != nil {
		t.Fatal(err)
	}
	conn := connect(ctx, t, c, latin)
	spec := Spec{Secret: []byte("s")}
	for _, l := range []string{"public.t.s=text", "public.t.n=name"} {
		r, _ := Parse(l)
		spec.Rules = append(spec.Rules, r)
	}
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	plan, err := Resolve(ctx, conn, spec, "LATIN1")
	if err != nil {
		t.Fatal(err)
	}
	var raw, out bytes.Buffer
	if _, err := conn.PgConn().CopyTo(ctx, &raw, pg.Copy{Schema: "public", Table: "t", Columns: []string{"s", "n"}, Encoding: "LATIN1"}.To()); err != nil {
		t.Fatal(err)
	}
	w := plan.Table("public", "t", []string{"s", "n"}).Writer(&out)
	if _, err := w.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\t")
	if len(f) != 2 || len(f[0]) != 3 || !ascii(out.String()) {
		t.Fatalf("masked LATIN1 row %q (from %q)", out.String(), raw.String())
	}
	if _, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(out.Bytes()), pg.Copy{Schema: "public", Table: "t", Columns: []string{"s", "n"}, Encoding: "LATIN1"}.From()); err != nil {
		t.Fatalf("load the masked row back: %v", err)
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	r, _ := Parse("public.t.n=regex:/a/b/")
	rep, err := Check(ctx, conn, Spec{Rules: []Rule{r}, Secret: []byte("s")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(rep.Errors, "\n"), "rule regex reads UTF8 text; the database's encoding is LATIN1") {
		t.Errorf("regex in LATIN1: %q", rep.Errors)
	}
}

// connect opens a connection to database db of c, closed when the test ends.
func connect(ctx context.Context, t *testing.T, c *pgtest.Instance, db string) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(c.ConnString(db))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.WithoutCancel(ctx)) })
	return conn
}

// TestReadFileErrors: a --mask-file's mistakes name the flag and the file
// once, and the line.
func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	path, missing := filepath.Join(dir, "m.rules"), filepath.Join(dir, "nope.rules")
	if err := os.WriteFile(path, []byte("# rules\na.b.c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{path, "--mask-file " + path + ` line 2: "a.b.c": want 'schema.table.column=RULE'`},
		{missing, "--mask-file " + missing + ": no such file or directory"},
	} {
		if _, err := ReadFile(tc.path); err == nil || err.Error() != tc.want {
			t.Errorf("%v, want %s", err, tc.want)
		}
	}
}

// TestMemo masks a column whose values repeat and one whose values do
// not, past the memo's window: the output is the same as masking each
// row alone (a Writer per row, whose memo never helps), and the memo of
// the distinct column has turned itself off.
func TestMemo(t *testing.T) {
	tb := table(t, "memo", 3, map[int]string{1: "name", 2: "regex:/[0-9]/#/"})
	var in strings.Builder
	for i := 0; i < memoWindow+500; i++ {
		fmt.Fprintf(&in, "%d\tname %d\\t%d\tv%d\n", i, i%7, i%3, i)
	}
	var want strings.Builder
	for _, line := range strings.SplitAfter(in.String(), "\n") {
		if line != "" {
			want.WriteString(mask(t, tb, line, len(line)))
		}
	}
	var out bytes.Buffer
	w := tb.Writer(&out)
	for _, line := range strings.SplitAfter(in.String(), "\n") {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != want.String() {
		t.Error("masking with the memo differs from masking each row alone")
	}
	if w.memos[0].off || len(w.memos[0].seen) != 21 {
		t.Errorf("repeating column: memo off %v with %d values, want on with 21", w.memos[0].off, len(w.memos[0].seen))
	}
	if !w.memos[1].off {
		t.Error("distinct column: memo still on")
	}
	// A long value is never remembered: a memo of 4096 documents would
	// hold them all.
	long := strings.Repeat("x", memoMaxLen+1)
	w = tb.Writer(io.Discard)
	for range 3 {
		if _, err := w.Write([]byte("1\t" + long + "\tv\n")); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(w.memos[0].seen); n != 0 {
		t.Errorf("a value of %d bytes was remembered (%d values)", len(long), n)
	}
}

// TestShiftDateEdges: dateshift moves BC dates and years past 9999 too
// (an original date never shows unless its keyed shift is 0), by at most
// DAYS days, and never out of PostgreSQL's range: at its ends the shift
// goes the other way.
func TestShiftDateEdges(t *testing.T) {
	astro := func(v string) (time.Time, string) {
		y, mo, d, rest, bc, ok := splitISODate([]byte(v))
		if !ok {
			t.Fatalf("%q: not a date", v)
		}
		if bc {
			y = 1 - y
		}
		return time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC), string(rest)
	}
	lo := time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{"4713-01-01 BC", "4714-11-24 BC", "0001-01-01", "0001-01-01 BC", "5874897-12-31", "5874897-01-01",
		"294276-12-31 23:59:59", "4713-01-01 00:00:00+00 BC", "10000-06-15 12:00:00+02", "2024-02-29"} {
		for _, m := range []uint64{0, 1, 7, 9, 10, 20} {
			var key [8]byte
			binary.BigEndian.PutUint64(key[:], m) // shift m%21 - 10
			got := string(shiftDate(nil, []byte(v), key[:], 10))
			want := int(m%21) - 10
			d0, rest0 := astro(v)
			d1, rest1 := astro(got)
			hi := time.Date(5874897, 12, 31, 0, 0, 0, 0, time.UTC)
			if rest0 != "" {
				hi = time.Date(294276, 12, 31, 0, 0, 0, 0, time.UTC)
			}
			moved := int(d1.Sub(d0).Hours() / 24)
			if rest1 != rest0 || (moved != want && moved != -want) || d1.Before(lo) || d1.After(hi) || (want != 0 && got == v) {
				t.Errorf("dateshift:10 of %q with shift %d: %q (moved %d days)", v, want, got, moved)
			}
		}
	}
	for _, v := range []string{"infinity", "-infinity", "x"} {
		if got := string(shiftDate(nil, []byte(v), make([]byte, 8), 10)); got != v {
			t.Errorf("dateshift of %q: %q", v, got)
		}
	}
}
