package toc

import (
	"reflect"
	"testing"
)

// TestSplitScript: statements and meta-commands of a psql script apart,
// a backslash at the start of a line inside a literal kept as text, and
// literals' values read back.
func TestSplitScript(t *testing.T) {
	script := "\\restrict abc\n\nSET client_encoding = 'UTF8';\n-- a comment; with a semicolon\nCOMMENT ON ROLE a IS 'multi\n\\line; ''q''';\n" +
		"CREATE DATABASE \"d;b\";\n\\connect \"d;b\"\nCOMMENT ON DATABASE x IS E'a\\'b\\n';\nSELECT $q$x;y$q$;\n\\unrestrict abc\n"
	parts, err := SplitScript(script)
	if err != nil {
		t.Fatal(err)
	}
	var metas []string
	var texts [][]string
	for _, p := range parts {
		metas = append(metas, p.Meta)
		var ts []string
		for _, s := range p.Statements {
			ts = append(ts, s.Text)
		}
		texts = append(texts, ts)
	}
	if want := []string{`\restrict abc`, `\connect "d;b"`, `\unrestrict abc`, ""}; !reflect.DeepEqual(metas, want) {
		t.Errorf("meta-commands %q, want %q", metas, want)
	}
	want := [][]string{nil,
		{"SET client_encoding = 'UTF8';", "COMMENT ON ROLE a IS 'multi\n\\line; ''q''';", `CREATE DATABASE "d;b";`},
		{`COMMENT ON DATABASE x IS E'a\'b\n';`, "SELECT $q$x;y$q$;"}, nil}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("statements %q, want %q", texts, want)
	}
	for _, tc := range []struct{ text, value string }{
		{"'multi\n\\line; ''q'''", "multi\n\\line; 'q'"},
		{`E'a\'b\n'`, "a'b\n"},
		{"$q$x;y$q$", "x;y"},
		{"'SCRAM-SHA-256$4096:x=='", "SCRAM-SHA-256$4096:x=="},
	} {
		if got := (Token{Kind: String, Text: tc.text}).Value(); got != tc.value {
			t.Errorf("Value of %s = %q, want %q", tc.text, got, tc.value)
		}
	}
}
