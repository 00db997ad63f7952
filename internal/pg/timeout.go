package pg

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CheckLockTimeout checks that s is a value SET lock_timeout accepts (what
// --lock-wait-timeout passes on, as pg_dump does): a number of
// milliseconds, or a number with one of PostgreSQL's time units (us, ms,
// s, min, h, d), at most INT_MAX milliseconds. Checked before connecting,
// so that a typo is a usage error, not a failure after the run began.
func CheckLockTimeout(s string) error {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	scale, known := map[string]float64{"": 1, "us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]
	if num == "" || err != nil || !known {
		return fmt.Errorf("invalid --lock-wait-timeout %q: want a duration such as 30s, 500ms or 2min (a bare number is milliseconds)", s)
	}
	if f*scale > math.MaxInt32 {
		return fmt.Errorf("--lock-wait-timeout %q is too long: PostgreSQL's lock_timeout takes at most %d ms (about 24 days)", s, math.MaxInt32)
	}
	return nil
}
