package archive

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pgsprint/pgsprint/internal/codec"
)

// TestRawNames writes a manifest whose names hold bytes invalid in UTF8
// (a SQL_ASCII source) and reads back every byte, in an archive of format
// version 2, while a manifest of valid UTF8 names keeps version 1.
func TestRawNames(t *testing.T) {
	comment := "comment \xff"
	m := &Manifest{
		Database: "db\xe9", Encoding: "SQL_ASCII",
		Tables:       []Table{{Schema: "s\xe8", Name: "caf\xe9", Columns: []string{"c\xe9", "\u65e5"}}},
		Sequences:    []Sequence{{Schema: "public", Name: "seq\x80"}},
		Relations:    []Object{{OID: 1, Schema: "s\xe8", Name: "caf\xe9", Kind: "r"}},
		LargeObjects: []LargeObject{{OID: 5, Owner: "r\xe9", Comment: &comment, ACL: []Grant{{Grantee: "g\xe9"}}}},
	}
	for _, tc := range []struct {
		name    string
		m       *Manifest
		version int
	}{
		{"raw", m, 2},
		{"utf8", &Manifest{Database: "caf\u00e9", Tables: []Table{{Schema: "\u65e5", Name: "t"}}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := codec.New("none", 0)
			if err != nil {
				t.Fatal(err)
			}
			orig := mapStrings(reflect.ValueOf(*tc.m), func(s string) string { return s }).Interface().(Manifest)
			var out bytes.Buffer
			w, err := NewWriter(&out, tc.m, c)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			ar, err := Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
			if err != nil {
				t.Fatal(err)
			}
			got := ar.Manifest()
			if got.FormatVersion != formatPacked {
				t.Errorf("format version %d, want %d", got.FormatVersion, formatPacked)
			}
			// The journal's manifest (MarshalManifest) is still marked
			// as version 2 when it needs to be.
			if _, v, err := MarshalManifest(tc.m); err != nil || v != tc.version {
				t.Errorf("MarshalManifest: version %d, %v; want %d", v, err, tc.version)
			}
			orig.FormatVersion, orig.Codec, orig.Level = got.FormatVersion, got.Codec, got.Level
			if !reflect.DeepEqual(*got, orig) {
				t.Errorf("manifest changed:\n got %+v\nwant %+v", *got, orig)
			}
			if strings.Contains(out.String(), "\uFFFD") {
				t.Error("the archive holds U+FFFD")
			}
		})
	}
}

// TestASCIIJSON escapes non-ASCII text so that any database can store it,
// and JSON decodes it back unchanged.
func TestASCIIJSON(t *testing.T) {
	in := map[string]string{"k": "caf\u00e9 \u20ac \U0001F600 \"q\""}
	b, _ := json.Marshal(in)
	a := ASCIIJSON(b)
	for _, c := range a {
		if c >= 0x80 {
			t.Fatalf("non-ASCII byte in %s", a)
		}
	}
	var out map[string]string
	if err := json.Unmarshal(a, &out); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v %q", err, out)
	}
}

// TestAnyString checks the walk that decides whether a manifest needs a
// marked copy: strings in nested structs, slices and pointers are all
// seen, and a manifest without a match is reported clean.
func TestAnyString(t *testing.T) {
	bad := "bad\xff"
	for _, tc := range []struct {
		name string
		m    Manifest
		want bool
	}{
		{"clean", Manifest{Database: "db", Tables: []Table{{Schema: "s", Name: "t", Columns: []string{"a"}}}}, false},
		{"top level", Manifest{Database: bad}, true},
		{"in a slice of structs", Manifest{Tables: []Table{{Schema: "s", Name: bad}}}, true},
		{"in a nested slice", Manifest{Tables: []Table{{Name: "t", Columns: []string{"a", bad}}}}, true},
		{"in a deeper slice", Manifest{LargeObjects: []LargeObject{{ACL: []Grant{{Grantee: bad}}}}}, true},
	} {
		got := anyString(reflect.ValueOf(&tc.m).Elem(), func(s string) bool { return !utf8.ValidString(s) })
		if got != tc.want {
			t.Errorf("%s: anyString = %v, want %v", tc.name, got, tc.want)
		}
		b, version, err := MarshalManifest(&tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		back, err := UnmarshalManifest(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(*back, tc.m) || (version >= formatRawNames) != tc.want {
			t.Errorf("%s: round trip %+v (version %d), want %+v", tc.name, *back, version, tc.m)
		}
	}
}
