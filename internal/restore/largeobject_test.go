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

// TestBatchLargeObjects cuts large objects into batches of at most
// loBatchObjects objects, ending a batch once it holds loBatchBytes, in
// order, every object once.
func TestBatchLargeObjects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int64
		want  []int // objects per batch
	}{
		{"none", nil, nil},
		{"small ones", make([]int64, 2500), []int{1000, 1000, 500}},
		{"a big one ends its batch", []int64{1, loBatchBytes, 1, 1}, []int{2, 2}},
		{"bytes add up", []int64{loBatchBytes / 2, loBatchBytes / 2, 1}, []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			los := make([]archive.LargeObject, len(tc.sizes))
			for i := range los {
				los[i] = archive.LargeObject{OID: uint32(i + 1), Size: tc.sizes[i]}
			}
			batches, sizes := batchLargeObjects(los, func(lo *archive.LargeObject) int64 { return lo.Size })
			var got []int
			next := uint32(1)
			for i, b := range batches {
				got = append(got, len(b))
				var sum int64
				for _, lo := range b {
					if lo.OID != next {
						t.Fatalf("batch %d: object %d, want %d", i, lo.OID, next)
					}
					next++
					sum += lo.Size
				}
				if sum != sizes[i] {
					t.Errorf("batch %d: size %d, want %d", i, sizes[i], sum)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("batches %v, want %v", got, tc.want)
			}
		})
	}
}
