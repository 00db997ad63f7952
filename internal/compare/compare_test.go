package compare

import (
	"strings"
	"testing"
)

func TestNormalizeSchemaDump(t *testing.T) {
	in := strings.Join([]string{
		`\restrict abcDEF123`,
		`-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)`,
		`-- Dumped by pg_dump version 18.1`,
		`-- Name: db "q" ü; Type: DATABASE; Schema: -; Owner: postgres`,
		`CREATE DATABASE "db ""q"" ü" WITH TEMPLATE = template0 ENCODING = 'UTF8';`,
		`ALTER DATABASE "db ""q"" ü" OWNER TO postgres;`,
		`\connect -reuse-previous=on "dbname='db ""q"" ü'"`,
		`-- Name: DATABASE "db ""q"" ü"; Type: COMMENT; Schema: -; Owner: postgres`,
		`COMMENT ON DATABASE "db ""q"" ü" IS 'x';`,
		`GRANT CONNECT ON DATABASE "db ""q"" ü" TO pgtest_reader;`,
		`COMMENT ON TABLE public.t IS 'DATABASE "db ""q"" ü2';`,
		`\unrestrict abcDEF123`,
	}, "\n")
	want := strings.Join([]string{
		`\restrict KEY`,
		`-- Dumped from database version VERSION`,
		`-- Dumped by pg_dump version VERSION`,
		`-- Name: DBNAME; Type: DATABASE; Schema: -; Owner: postgres`,
		`CREATE DATABASE DBNAME WITH TEMPLATE = template0 ENCODING = 'UTF8';`,
		`ALTER DATABASE DBNAME OWNER TO postgres;`,
		`\connect DBNAME`,
		`-- Name: DATABASE DBNAME; Type: COMMENT; Schema: -; Owner: postgres`,
		`COMMENT ON DATABASE DBNAME IS 'x';`,
		`GRANT CONNECT ON DATABASE DBNAME TO pgtest_reader;`,
		`COMMENT ON TABLE public.t IS 'DATABASE "db ""q"" ü2';`,
		`\unrestrict KEY`,
	}, "\n")
	if got := NormalizeSchemaDump(in, `db "q" ü`); got != want {
		t.Errorf("NormalizeSchemaDump:\n%s", SchemaDiff(want, got))
	}
	// A bare (unquoted) name is replaced only as a whole token.
	if got := NormalizeSchemaDump("ALTER DATABASE mydb OWNER TO mydb_owner;", "mydb"); got != "ALTER DATABASE DBNAME OWNER TO mydb_owner;" {
		t.Errorf("bare name: got %q", got)
	}
	if got := NormalizeSchemaDump("ALTER DATABASE mydb2 OWNER TO x;", "mydb"); got != "ALTER DATABASE mydb2 OWNER TO x;" {
		t.Errorf("prefix of another name replaced: got %q", got)
	}
}

func TestSchemaDiff(t *testing.T) {
	if d := SchemaDiff("a\nb\n", "a\nb\n"); d != "" {
		t.Errorf("equal inputs gave a diff: %q", d)
	}
	var a, b []string
	for i := 0; i < 100; i++ {
		line := "line " + strings.Repeat("x", i%5)
		a = append(a, line)
		b = append(b, line)
	}
	b[50] = "changed"
	b = append(b[:70], append([]string{"inserted"}, b[70:]...)...)
	d := SchemaDiff(strings.Join(a, "\n"), strings.Join(b, "\n"))
	for _, want := range []string{"first difference at line 51", "- line ", "+ changed", "+ inserted", "equal lines"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if n := strings.Count(d, "\n"); n > maxDiffLines+2 {
		t.Errorf("diff has %d lines, want at most %d", n, maxDiffLines+2)
	}
}

func TestFingerprintDiff(t *testing.T) {
	a := map[string]string{"x": "1", "y": "2", "onlya": "3"}
	b := map[string]string{"x": "1", "y": "20", "onlyb": "4"}
	got := FingerprintDiff(a, b)
	want := []string{"onlya: only in a (3)", "onlyb: only in b (4)", "y:\n  a: 2\n  b: 20"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("FingerprintDiff = %q, want %q", got, want)
	}
	if d := FingerprintDiff(a, a); len(d) != 0 {
		t.Errorf("equal maps gave %q", d)
	}
}
