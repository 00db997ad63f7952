package restore

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// TestSmallTableDecisions: which loads use TRUNCATE + COPY FREEZE, and
// when a COPY session is also the SQL session (no settings between a load
// and the tasks fused into it, and none in its transaction).
func TestSmallTableDecisions(t *testing.T) {
	for _, tc := range []struct {
		size int64
		want bool
	}{
		{0, false},
		{8 << 10, false},
		{freezeMinBytes - 1, false},
		{freezeMinBytes, true},
		{fuseMaxBytes, true},
		{1 << 30, true},
	} {
		if got := freezes(tc.size); got != tc.want {
			t.Errorf("freezes(%d) = %v, want %v", tc.size, got, tc.want)
		}
	}
	preamble := func(enc string) []string {
		return []string{"SET statement_timeout = 0;", "SET client_encoding = '" + enc + "';",
			"SET standard_conforming_strings = on;", "SELECT pg_catalog.set_config('search_path', '', false);"}
	}
	for _, tc := range []struct {
		name     string
		preamble []string
		archive  string // the manifest's encoding
		oneMode  bool
	}{
		{"UTF8 archive, UTF8 script", preamble("UTF8"), "UTF8", true},
		{"SQL_ASCII archive and script", preamble("SQL_ASCII"), "SQL_ASCII", true},
		{"LATIN1 archive: COPY in UTF8, script in LATIN1", preamble("LATIN1"), "LATIN1", false},
		{"no post-data script", nil, "UTF8", false},
		{"script without client_encoding", []string{"SET statement_timeout = 0;"}, "UTF8", false},
		{"quote in the encoding", preamble("UTF8'; DROP"), "UTF8", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &engine{r: &loader{m: &archive.Manifest{Encoding: tc.archive}}, preamble: tc.preamble}
			if got := e.oneMode(); got != tc.oneMode {
				t.Errorf("oneMode() = %v, want %v", got, tc.oneMode)
			}
		})
	}
}

// TestFailedReaderCause: a COPY that failed because its reader did is
// reported with the reader's error (the archive's), not the server's
// quoting of it; a reader that reached its end leaves the COPY's error.
func TestFailedReaderCause(t *testing.T) {
	damaged := errors.New("stream 3 frame 1: checksum mismatch")
	server := errors.New("ERROR: COPY from stdin failed (SQLSTATE 57014)")
	for _, tc := range []struct {
		name   string
		reader io.Reader
		want   error
	}{
		{"reader failed", io.MultiReader(strings.NewReader("1\n"), iotest.ErrReader(damaged)), damaged},
		{"reader whole", strings.NewReader("1\n"), server},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &failedReader{r: tc.reader}
			_, _ = io.Copy(io.Discard, f)
			if got := f.cause(server); got != tc.want {
				t.Errorf("cause = %v, want %v", got, tc.want)
			}
		})
	}
}
