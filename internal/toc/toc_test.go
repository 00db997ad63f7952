package toc

import (
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

const script = `SET statement_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);

SET default_tablespace = '';

--
-- TOC entry 10 (class 2606 OID 1)
-- Dependencies: 1 2
-- Name: t t_pkey; Type: CONSTRAINT; Schema: s; Owner: o
--

ALTER TABLE ONLY s.t
    ADD CONSTRAINT t_pkey PRIMARY KEY (id);


SET default_tablespace = fast;

--
-- TOC entry 11 (class 1259 OID 2)
-- Name: t_x; Type: INDEX; Schema: s; Owner: o
--

CREATE INDEX t_x ON s.t USING btree (((x || ';
--
-- TOC entry 12 (class 0 OID 0)
--
'::text)));


--
-- TOC entry 12 (class 0 OID 0)
-- Dependencies: 11
-- Name: INDEX t_x; Type: COMMENT; Schema: s; Owner: o
--

COMMENT ON INDEX s.t_x IS 'a; b';


--
-- PostgreSQL database dump complete
--

\unrestrict KEY
`

func TestParseScript(t *testing.T) {
	s, err := ParseScript(script, []int{10, 11, 12})
	if err == nil {
		// The fake header inside the string literal splits entry 11, so
		// the parse must notice that dump ID 12 appears twice.
		t.Fatalf("a header inside a string literal went unnoticed: %+v", s.Entries)
	}
	clean := strings.Replace(script, "';\n--\n-- TOC entry 12 (class 0 OID 0)\n--\n'", "';'", 1)
	s, err = ParseScript(clean, []int{10, 11, 12})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Preamble, " "); got != "SET statement_timeout = 0; SELECT pg_catalog.set_config('search_path', '', false);" {
		t.Errorf("preamble %q", got)
	}
	for i, want := range []struct {
		typ, name, sql, settings, deps string
	}{
		{"CONSTRAINT", "t t_pkey", "ALTER TABLE ONLY s.t\n    ADD CONSTRAINT t_pkey PRIMARY KEY (id);", "SET default_tablespace = '';", "[1 2]"},
		{"INDEX", "t_x", "CREATE INDEX t_x ON s.t USING btree (((x || ';'::text)));", "SET default_tablespace = fast;", "[]"},
		{"COMMENT", "INDEX t_x", "COMMENT ON INDEX s.t_x IS 'a; b';", "SET default_tablespace = fast;", "[11]"},
	} {
		e := s.Entries[i]
		if e.Type != want.typ || e.Name != want.name || e.Schema != "s" || e.SQL != want.sql || strings.Join(e.Settings, " ") != want.settings || fmtInts(e.Deps) != want.deps {
			t.Errorf("entry %d = %+v, want %+v", i, e, want)
		}
	}
	if _, err := ParseScript(clean, []int{10, 12}); err == nil {
		t.Error("a listing that disagrees with the script was accepted")
	}
	// A whole archive's script may order entries differently from its
	// listing, but must hold exactly its entries.
	if _, err := ParseScript(clean, []int{12, 10, 11}); err == nil {
		t.Error("ParseScript accepted another order")
	}
	if _, err := ParseWhole(clean, []int{12, 10, 11}); err != nil {
		t.Errorf("ParseWhole refused another order: %v", err)
	}
	for _, want := range [][]int{{10, 11, 13}, {10, 11}, {10, 11, 11}} {
		if _, err := ParseWhole(clean, want); err == nil {
			t.Errorf("ParseWhole accepted listing %v", want)
		}
	}
	if _, err := ParseWhole(script, []int{10, 11, 12}); err == nil {
		t.Error("ParseWhole missed a header inside a string literal")
	}
}

func fmtInts(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.Itoa(x))
	}
	return "[" + strings.Join(s, " ") + "]"
}

func TestStatements(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want []string
	}{
		{"CREATE INDEX a ON s.t (x);\n\nALTER TABLE s.t CLUSTER ON a;", []string{"CREATE INDEX a ON s.t (x);", "ALTER TABLE s.t CLUSTER ON a;"}},
		{"SELECT ';' AS \"a;b\", $q$;$q$, E'\\';', 1; -- c;\nSELECT 2;", []string{"SELECT ';' AS \"a;b\", $q$;$q$, E'\\';', 1;", "-- c;\nSELECT 2;"}},
		{"/* ; /* ; */ */ SELECT 1;", []string{"/* ; /* ; */ */ SELECT 1;"}},
	} {
		st, err := Statements(tc.sql)
		if err != nil {
			t.Errorf("%q: %v", tc.sql, err)
			continue
		}
		var got []string
		for _, s := range st {
			got = append(got, s.Text)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%q split into %q, want %q", tc.sql, got, tc.want)
		}
	}
	for _, bad := range []string{"SELECT 1", "SELECT 'x;", `SELECT "x;`, "SELECT $a$;"} {
		if _, err := Statements(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestIdent(t *testing.T) {
	toks, err := Tokenize(`ALTER TABLE ONLY "My ""T"".x".plain`)
	if err != nil {
		t.Fatal(err)
	}
	if got := toks[3].Ident() + "|" + toks[5].Ident(); got != `My "T".x|plain` {
		t.Errorf("idents %q", got)
	}
}

// TestReadScript checks that reading a script as it comes, in pieces of
// any size and with or without a final newline, gives exactly what
// parsing its whole text does, and that entries with the same settings
// share them.
func TestReadScript(t *testing.T) {
	clean := strings.Replace(script, "';\n--\n-- TOC entry 12 (class 0 OID 0)\n--\n'", "';'", 1)
	want, err := ParseScript(clean, []int{10, 11, 12})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		r    func(string) io.Reader
		text string
	}{
		{"whole", func(s string) io.Reader { return strings.NewReader(s) }, clean},
		{"one byte at a time", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }, clean},
		{"half at a time", func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) }, clean},
		{"no final newline", func(s string) io.Reader { return strings.NewReader(s) }, strings.TrimSuffix(clean, "\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadScript(tc.r(tc.text), []int{10, 11, 12})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("read %+v\nparsed %+v", got, want)
			}
			if &got.Entries[1].Settings[0] != &got.Entries[2].Settings[0] {
				t.Error("entries 11 and 12 have the same settings but each a copy")
			}
		})
	}
	if _, err := ReadScript(iotest.ErrReader(io.ErrUnexpectedEOF), nil); err == nil {
		t.Error("a read error was not reported")
	}
}
