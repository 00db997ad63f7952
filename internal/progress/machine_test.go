package progress

import (
	"testing"
	"time"
)

// TestBusyTime: user, nice, system, irq and softirq count; idle, iowait
// and steal do not; anything else is not a cpu line.
func TestBusyTime(t *testing.T) {
	for _, tc := range []struct {
		line string
		want time.Duration
	}{
		{"cpu  100 20 300 9999 50 4 6 700 0 0", 430 * time.Second / 100},
		{"cpu  0 0 0 5 5 0 0 5", 0},
		{"cpu0 100 20 300 9999 50 4 6 700", 0},
		{"cpu  100 x 300 9999 50 4 6", 0},
		{"cpu  1 2", 0},
		{"", 0},
	} {
		if got := busyTime(tc.line); got != tc.want {
			t.Errorf("busyTime(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}
