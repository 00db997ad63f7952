package toc

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	list := ";\n; Archive created at 2026-01-01\n;\n219; 1259 16385 TABLE public t postgres\n2582; 0 0 STATISTICS DATA public t \n6; 2615 16422 SCHEMA - app postgres\n"
	header, entries, err := ParseList(list)
	if err != nil {
		t.Fatal(err)
	}
	if len(header) != 3 {
		t.Errorf("header %q", header)
	}
	want := []ListEntry{
		{ID: 219, Class: 1259, OID: 16385, Desc: "TABLE public t postgres", Line: "219; 1259 16385 TABLE public t postgres"},
		{ID: 2582, Desc: "STATISTICS DATA public t", Line: "2582; 0 0 STATISTICS DATA public t"},
		{ID: 6, Class: 2615, OID: 16422, Desc: "SCHEMA - app postgres", Line: "6; 2615 16422 SCHEMA - app postgres"},
	}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("got %+v\nwant %+v", entries, want)
	}
	if _, _, err := ParseList("219; x 1 TABLE a b c\n"); err == nil {
		t.Error("a bad class was accepted")
	}
}

func TestParseUseList(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []UseListLine
		err        string
	}{
		{"kept, commented, comments and blanks", "; header\n;\n219; 1259 16385 TABLE public t postgres\n;2590; 0 16385 TABLE DATA public t postgres\n\n  ; 12; 0 0 COMMENT - x\n7\n",
			[]UseListLine{{Number: 3, ID: 219}, {Number: 4, ID: 2590, Commented: true}, {Number: 6, ID: 12, Commented: true}, {Number: 7, ID: 7}}, ""},
		{"CRLF", "219; 1259 1 TABLE a b c\r\n", []UseListLine{{Number: 1, ID: 219}}, ""},
		{"garbage", "219; 1259 1 TABLE a b c\nDROP TABLE t;\n", nil, "line 2"},
		{"number glued to text", "12abc; x\n", nil, "line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUseList(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// TestParseStatisticsHeader reads pg_dump 18's "-- Statistics for Name:"
// entry header.
func TestParseStatisticsHeader(t *testing.T) {
	script := "SET x = 1;\n\n--\n-- TOC entry 2582 (class 0 OID 0)\n-- Dependencies: 219 2575\n-- Statistics for Name: t; Type: STATISTICS DATA; Schema: public; Owner: -\n-- Data Pos: 0\n--\n\nSELECT * FROM pg_catalog.pg_restore_relation_stats('version', '180006'::integer);\n"
	s, err := ParseScript(script, []int{2582})
	if err != nil {
		t.Fatal(err)
	}
	e := s.Entries[0]
	if e.Type != "STATISTICS DATA" || e.Name != "t" || !reflect.DeepEqual(e.Deps, []int{219, 2575}) || !strings.HasPrefix(e.SQL, "SELECT * FROM pg_catalog.pg_restore_relation_stats") {
		t.Errorf("got %+v", e)
	}
}
