package pgtest

import "testing"

// TestNormalizeAcrossVersions checks that each version difference the
// cross-version comparison forgives is evened out, and that a real
// difference survives.
func TestNormalizeAcrossVersions(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		same       bool
	}{
		{"view qualifiers", "CREATE VIEW app.v AS\n SELECT orders.id,\n    \"tâblé\".\"x\"\n   FROM app.orders;", "CREATE VIEW app.v AS\n SELECT id,\n    \"x\"\n   FROM app.orders;", true},
		{"qualifiers outside views count", "ALTER TABLE app.t OWNER TO x;", "ALTER TABLE t OWNER TO x;", false},
		{"pre-17 ALL", "GRANT SELECT,INSERT,REFERENCES,DELETE,TRIGGER,TRUNCATE,UPDATE ON TABLE app.s TO w;", "GRANT ALL ON TABLE app.s TO w;", true},
		{"partial grant differs", "GRANT SELECT ON TABLE app.s TO w;", "GRANT ALL ON TABLE app.s TO w;", false},
		{"multirange name", "CREATE TYPE app.r AS RANGE (\n    subtype = float8,\n    multirange_type_name = app.mr\n);", "CREATE TYPE app.r AS RANGE (\n    subtype = float8,\n);", true},
		{"procedure IN", "CREATE PROCEDURE app.p(IN msg text, IN n int)", "CREATE PROCEDURE app.p(msg text, n int)", true},
		{"public schema", "--\n-- Name: public; Type: SCHEMA; Schema: -; Owner: postgres\n--\n\nALTER SCHEMA public OWNER TO postgres;\n--\n-- Name: t; Type: TABLE", "--\n-- Name: t; Type: TABLE", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			na, nb := normalizeAcrossVersions(tc.a), normalizeAcrossVersions(tc.b)
			if (na == nb) != tc.same {
				t.Errorf("same = %v, want %v:\n%q\n%q", na == nb, tc.same, na, nb)
			}
		})
	}
}
