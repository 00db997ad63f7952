//go:build long

package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// TestTorture runs a few rounds of the torture run under make test-long:
// PGSPRINT_TORTURE_ROUNDS runs more, PGSPRINT_TORTURE_SEED replays a seed.
func TestTorture(t *testing.T) {
	if _, err := pgctl.FindBinDir(""); errors.Is(err, pgctl.ErrNoBinaries) && os.Getenv("PGSPRINT_TEST_REQUIRE_PG") == "" {
		t.Skip(err)
	}
	c := config{rounds: 5, first: 1, seed: uint64(time.Now().UnixNano()), dir: os.Getenv("PGSPRINT_TEST_DIR"), verbose: true, out: testWriter{t}}
	if v, err := strconv.Atoi(os.Getenv("PGSPRINT_TORTURE_ROUNDS")); err == nil && v > 0 {
		c.rounds = v
	}
	if v, err := strconv.ParseUint(os.Getenv("PGSPRINT_TORTURE_SEED"), 10, 64); err == nil && v > 0 {
		c.seed = v
	}
	st, err := run(context.Background(), c)
	t.Log(st)
	if err != nil {
		t.Fatal(err)
	}
	if st.breaks > 0 {
		t.Fatalf("%d invariant breaks (seed %d)", st.breaks, c.seed)
	}
}

// testWriter logs each write through t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
