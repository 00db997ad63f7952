package filter

import "testing"

// TestParse checks the conversion against what psql's
// processSQLNamePattern produces for the same patterns.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, schema, name string
	}{
		{"Orders", "", "^(orders)$"},
		{`"Orders"`, "", "^(Orders)$"},
		{"app.order*", "^(app)$", "^(order.*)$"},
		{`"a.b"`, "", `^(a\.b)$`},
		{"x$y", "", `^(x\$y)$`},
		{`"we.ird".t?`, `^(we\.ird)$`, "^(t.)$"},
		{`"say ""hi"""`, "", `^(say "hi")$`},
		{`"a*b"`, "", `^(a\*b)$`},
		{"int[]", "", `^(int\[])$`},
		{"a|b", "", "^(a|b)$"},
		{"*.*", "^(.*)$", "^(.*)$"},
		{"ÄB", "", "^(Äb)$"},
	} {
		p, err := Parse(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if p.Schema != tc.schema || p.Name != tc.name {
			t.Errorf("Parse(%s) = %q, %q; want %q, %q", tc.in, p.Schema, p.Name, tc.schema, tc.name)
		}
	}
	if p, err := Parse(`"My DB".app.t`); err != nil || p.Database != "^(My DB)$" || p.Schema != "^(app)$" || p.Name != "^(t)$" {
		t.Errorf("three-part name: %+v, %v", p, err)
	}
	if _, err := Parse("a.b.c.d"); err == nil {
		t.Error("a.b.c.d accepted")
	}
	if p, err := ParseSchema("db.app"); err != nil || p.Database != "^(db)$" || p.Schema != "^(app)$" {
		t.Errorf("two-part schema pattern: %+v, %v", p, err)
	}
}
