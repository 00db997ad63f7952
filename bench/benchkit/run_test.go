package benchkit

import (
	"context"
	"os"
	"testing"
)

// TestLocksPerTransaction checks the lock table of a bench cluster holds
// pg_dump's lock on every table of the small-tables dataset.
func TestLocksPerTransaction(t *testing.T) {
	for _, tc := range []struct{ tables, want int }{
		{0, 64},
		{1000, 64},
		{10_000, 125},
		{100_000, 1250},
	} {
		if got := LocksPerTransaction(tc.tables); got != tc.want {
			t.Errorf("LocksPerTransaction(%d) = %d, want %d", tc.tables, got, tc.want)
		}
		if got := LocksPerTransaction(tc.tables) * benchConnections; got < tc.tables {
			t.Errorf("%d tables: %d lock slots", tc.tables, got)
		}
	}
}

// TestRunOwnRSS checks that Run reports a process's own peak RSS apart
// from its children's: a shell that only waits for a child using 64 MiB
// stays far below it.
func TestRunOwnRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	r := Run(context.Background(), "sh", Cmd("sh", "-c", `dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; sleep 0.3`), nil)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if r.OwnRSS <= 0 || r.OwnRSS >= 32<<20 || r.MaxRSS < 64<<20 {
		t.Errorf("own peak RSS %d MiB, with children %d MiB: want the shell's own well below its child's 64 MiB", r.OwnRSS>>20, r.MaxRSS>>20)
	}
}
