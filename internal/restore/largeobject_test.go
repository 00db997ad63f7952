package restore

import (
	"reflect"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
)

func TestLargeObjectMetadata(t *testing.T) {
	comment := "it's; DROP TABLE x"
	lo := &archive.LargeObject{OID: 42, Owner: `o"wner`, HasACL: true, Comment: &comment, ACL: []archive.Grant{
		{Grantee: "", Privilege: "SELECT"},
		{Grantee: "bob", Privilege: "UPDATE", Grantable: true},
		{Grantee: "eve", Privilege: "ALL; DROP TABLE x; --"},
	}}
	for _, tc := range []struct {
		name           string
		noOwner, noACL bool
		want           []string
	}{
		{"everything", false, false, []string{
			`ALTER LARGE OBJECT 42 OWNER TO "o""wner"`,
			`REVOKE ALL ON LARGE OBJECT 42 FROM PUBLIC`,
			`REVOKE ALL ON LARGE OBJECT 42 FROM "o""wner"`,
			`GRANT SELECT ON LARGE OBJECT 42 TO PUBLIC`,
			`GRANT UPDATE ON LARGE OBJECT 42 TO "bob" WITH GRANT OPTION`,
			`COMMENT ON LARGE OBJECT 42 IS 'it''s; DROP TABLE x'`,
		}},
		{"no owner, no privileges", true, true, []string{
			`COMMENT ON LARGE OBJECT 42 IS 'it''s; DROP TABLE x'`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := largeObjectMetadata(lo, tc.noOwner, tc.noACL); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
