package file_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/file"
	"github.com/pgsprint/pgsprint/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Medium{
		New: func(t *testing.T) store.Backend {
			return file.New(filepath.Join(t.TempDir(), "a.pgs"))
		},
		Atomic:   true,
		NotFound: true,
		Replaces: true,
	})
}

// TestFileMode: an archive holds all the data, so only its owner reads
// it; and no temporary file is left beside it.
func TestFileMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.pgs")
	b := file.New(path)
	s, err := b.Create(t.Context(), store.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the archive", len(entries))
	}
}
