package location

import (
	"bytes"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store/file"
	"github.com/pgsprint/pgsprint/internal/store/stdio"
)

func TestParse(t *testing.T) {
	std := Stdio{In: &bytes.Buffer{}, Out: &bytes.Buffer{}}
	for _, tc := range []struct {
		loc, kind, name string
	}{
		{"-", "stdio", "standard input"},
		{"a.pgs", "file", "a.pgs"},
		{"/backups/2024/db.pgs", "file", "/backups/2024/db.pgs"},
		{"./-", "file", "./-"},
		{"weird://not-a-medium", "file", "weird://not-a-medium"}, // unknown schemes stay paths, as before
	} {
		b, err := Parse(tc.loc, std)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.loc, err)
		}
		kind := "?"
		switch b.(type) {
		case *file.Backend:
			kind = "file"
		case *stdio.Backend:
			kind = "stdio"
		}
		if kind != tc.kind || b.String() != tc.name {
			t.Errorf("Parse(%q) = %s %q, want %s %q", tc.loc, kind, b, tc.kind, tc.name)
		}
	}
}
