package pg

import "testing"

// TestCopy: both directions of one chunk's COPY, with hostile names,
// column lists (and none), ENCODING for text, FORMAT binary (clone between
// servers of one major version, where ENCODING does not apply), FREEZE on
// loads only, and a chunk's query on reads only.
func TestCopy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		c        Copy
		to, from string
	}{
		{"plain", Copy{Schema: "public", Table: "t", Columns: []string{"a", "b"}},
			`COPY "public"."t" ("a", "b") TO STDOUT`,
			`COPY "public"."t" ("a", "b") FROM STDIN`},
		{"no columns", Copy{Schema: "s", Table: "empty"},
			`COPY "s"."empty" TO STDOUT`,
			`COPY "s"."empty" FROM STDIN`},
		{"hostile names", Copy{Schema: `we"ird`, Table: "Tab le; DROP TABLE x", Columns: []string{`c"1`, "Mixed", "ünï"}},
			`COPY "we""ird"."Tab le; DROP TABLE x" ("c""1", "Mixed", "ünï") TO STDOUT`,
			`COPY "we""ird"."Tab le; DROP TABLE x" ("c""1", "Mixed", "ünï") FROM STDIN`},
		{"encoding", Copy{Schema: "public", Table: "t", Columns: []string{"a"}, Encoding: "LATIN1"},
			`COPY "public"."t" ("a") TO STDOUT WITH (ENCODING 'LATIN1')`,
			`COPY "public"."t" ("a") FROM STDIN WITH (ENCODING 'LATIN1')`},
		{"hostile encoding", Copy{Schema: "public", Table: "t", Encoding: "x') ; --"},
			`COPY "public"."t" TO STDOUT WITH (ENCODING 'x'') ; --')`,
			`COPY "public"."t" FROM STDIN WITH (ENCODING 'x'') ; --')`},
		{"binary ignores encoding", Copy{Schema: "public", Table: "t", Columns: []string{"a"}, Binary: true, Encoding: "UTF8"},
			`COPY "public"."t" ("a") TO STDOUT WITH (FORMAT binary)`,
			`COPY "public"."t" ("a") FROM STDIN WITH (FORMAT binary)`},
		{"freeze, text", Copy{Schema: "public", Table: "t", Encoding: "UTF8", Freeze: true},
			`COPY "public"."t" TO STDOUT WITH (ENCODING 'UTF8')`,
			`COPY "public"."t" FROM STDIN WITH (ENCODING 'UTF8', FREEZE)`},
		{"freeze, binary", Copy{Schema: "public", Table: "t", Binary: true, Freeze: true},
			`COPY "public"."t" TO STDOUT WITH (FORMAT binary)`,
			`COPY "public"."t" FROM STDIN WITH (FORMAT binary, FREEZE)`},
		{"freeze alone", Copy{Schema: "public", Table: "t", Freeze: true},
			`COPY "public"."t" TO STDOUT`,
			`COPY "public"."t" FROM STDIN WITH (FREEZE)`},
		{"chunk query", Copy{Schema: "public", Table: "t", Columns: []string{"a"}, Encoding: "UTF8",
			Query: `SELECT "a" FROM ONLY "public"."t" WHERE ctid < '(10,0)'`},
			`COPY (SELECT "a" FROM ONLY "public"."t" WHERE ctid < '(10,0)') TO STDOUT WITH (ENCODING 'UTF8')`,
			`COPY "public"."t" ("a") FROM STDIN WITH (ENCODING 'UTF8')`},
		{"chunk query, binary", Copy{Schema: "public", Table: "t", Binary: true, Query: `SELECT  FROM ONLY "public"."t"`},
			`COPY (SELECT  FROM ONLY "public"."t") TO STDOUT WITH (FORMAT binary)`,
			`COPY "public"."t" FROM STDIN WITH (FORMAT binary)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.To(); got != tc.to {
				t.Errorf("To()   = %s\nwant     %s", got, tc.to)
			}
			if got := tc.c.From(); got != tc.from {
				t.Errorf("From() = %s\nwant     %s", got, tc.from)
			}
		})
	}
}
