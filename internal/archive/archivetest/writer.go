package archivetest

import (
	"bytes"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/codec"
)

// NewWriter starts an uncompressed archive of m in memory, for a test that
// writes its own streams (a stream left out, blocks of its choosing): the
// archive's bytes are in the buffer once the writer is closed.
func NewWriter(t testing.TB, m *archive.Manifest) (*archive.Writer, *bytes.Buffer) {
	t.Helper()
	none, err := codec.New("none", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := &bytes.Buffer{}
	w, err := archive.NewWriter(out, m, none)
	if err != nil {
		t.Fatal(err)
	}
	return w, out
}
