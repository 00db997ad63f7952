package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/spf13/cobra"
)

// TestMemoryLimit checks the soft memory limit each command sets from its
// --jobs, and that GOMEMLIMIT in the environment wins.
func TestMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	for _, tc := range []struct {
		name     string
		args     []string
		withJobs bool
		env      string
		want     int64
	}{
		{"default jobs", nil, true, "", memoryLimitBase + 3*memoryLimitPerJob},
		{"-j 2", []string{"-j", "2"}, true, "", 192 << 20},
		{"-j 0 counts as one", []string{"-j", "0"}, true, "", 160 << 20},
		{"no --jobs flag", nil, false, "", 160 << 20},
		{"GOMEMLIMIT wins", []string{"-j", "2"}, true, "1GiB", math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(math.MaxInt64)
			cmd := &cobra.Command{Use: "x", Run: func(*cobra.Command, []string) {}}
			if tc.withJobs {
				cmd.Flags().IntP("jobs", "j", 3, "")
			}
			if err := cmd.Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			set := setMemoryLimit(cmd)
			if got := debug.SetMemoryLimit(-1); got != tc.want || (set != 0) != (tc.env == "") {
				t.Errorf("memory limit %d MiB, want %d MiB", got>>20, tc.want>>20)
			}
		})
	}
}

// TestAdaptiveLimit checks the limit follows a live heap above the floor
// with a quarter of headroom, so that the collector never runs without
// pause.
func TestAdaptiveLimit(t *testing.T) {
	for _, tc := range []struct{ floor, live, want int64 }{
		{192 << 20, 0, 192 << 20},
		{192 << 20, 100 << 20, 192 << 20},
		{192 << 20, 160 << 20, 200 << 20},
		{192 << 20, 400 << 20, 500 << 20},
	} {
		if got := adaptiveLimit(tc.floor, tc.live); got != tc.want {
			t.Errorf("adaptiveLimit(%d MiB, %d MiB) = %d MiB, want %d MiB", tc.floor>>20, tc.live>>20, got>>20, tc.want>>20)
		}
	}
}
