//go:build long

package cluster

import (
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestAllAtDefaultLimits is issue 30's server at full size: two databases
// of 10,000 tables each (primary key plus one index, a few rows each) and
// eight small databases, on a server at default settings
// (max_locks_per_transaction = 64, max_connections = 100: 6,400 lock
// slots by the formula), through dump --all, restore --all and clone --all
// --clean at -j 2. pg_dumpall succeeds there, so pgsprint must. Slow
// (minutes): make test-long. TestAllWithinLockTable makes the same point
// in seconds with a smaller lock table.
func TestAllAtDefaultLimits(t *testing.T) {
	allWithinLocks(t, pgtest.Options{}, 10000, 8)
}
