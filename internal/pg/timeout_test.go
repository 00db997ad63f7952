package pg

import "testing"

// TestCheckLockTimeout: what SET lock_timeout takes passes, the rest is
// refused before connecting.
func TestCheckLockTimeout(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"0", true}, {"300", true}, {"300ms", true}, {"2s", true}, {" 2 s ", true}, {"1.5s", true},
		{"2min", true}, {"1h", true}, {"1d", true}, {"500us", true}, {"24d", true},
		{"abc", false}, {"", false}, {"s", false}, {"-1", false}, {"2 sec", false}, {"2m", false},
		{"1S", false}, {"30d", false}, {"1.2.3s", false}, {"2s; DROP TABLE t", false},
	} {
		if err := CheckLockTimeout(tc.in); (err == nil) != tc.ok {
			t.Errorf("CheckLockTimeout(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}
