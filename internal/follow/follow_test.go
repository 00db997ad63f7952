package follow

import (
	"strings"
	"testing"
)

func TestNamesResolve(t *testing.T) {
	for _, tc := range []struct {
		db    string
		in    Names
		want  Names
		fails bool
	}{
		{db: "app", want: Names{Slot: "pgsprint_app", Publication: "pgsprint_app"}},
		{db: "My-DB é", want: Names{Slot: "pgsprint_my_db__", Publication: "pgsprint_my_db__"}},
		{db: "app", in: Names{Slot: "s1", Publication: "Pub One"}, want: Names{Slot: "s1", Publication: "Pub One"}},
		{db: "app", in: Names{Slot: "Bad-Slot"}, fails: true},
		{db: string(make([]byte, 100)), want: Names{Slot: "pgsprint_" + strings.Repeat("_", 54), Publication: "pgsprint_" + strings.Repeat("_", 54)}},
	} {
		got, err := tc.in.Resolve(tc.db)
		if (err != nil) != tc.fails {
			t.Errorf("Resolve(%q, %+v): error %v", tc.db, tc.in, err)
			continue
		}
		if !tc.fails && got != tc.want {
			t.Errorf("Resolve(%q, %+v) = %+v, want %+v", tc.db, tc.in, got, tc.want)
		}
	}
}
