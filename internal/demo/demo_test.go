package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDemo runs the README's first command at the smallest scale: it must
// verify its own round trip and print the comparison table.
func TestDemo(t *testing.T) {
	pgtest.RequireBinaries(t)
	c, err := codec.New("zstd", 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), Options{Scale: 0.01, Jobs: 2, Codec: c, Out: &out}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"verified: schema identical", "pgsprint (zstd)", "pg_dump -Fc / pg_restore -j", "pg_dump time / pgsprint time"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
