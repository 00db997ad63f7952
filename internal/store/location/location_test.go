package location

import (
	"bytes"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store/file"
	"github.com/pgsprint/pgsprint/internal/store/s3"
	"github.com/pgsprint/pgsprint/internal/store/stdio"
	"github.com/pgsprint/pgsprint/internal/store/web"
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
		{"s3://bucket/dir/a.pgs", "s3", "s3://bucket/dir/a.pgs"},
		{"S3://bucket/a.pgs", "s3", "s3://bucket/a.pgs"},
		{"https://host/a.pgs?X-Amz-Signature=secret", "web", "https://host/a.pgs?…"}, // the query is never shown
		{"http://10.0.0.1:8080/a.pgs", "web", "http://10.0.0.1:8080/a.pgs"},
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
		case *s3.Backend:
			kind = "s3"
		case *web.Backend:
			kind = "web"
		}
		if kind != tc.kind || b.String() != tc.name {
			t.Errorf("Parse(%q) = %s %q, want %s %q", tc.loc, kind, b, tc.kind, tc.name)
		}
	}
}
