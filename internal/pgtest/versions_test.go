package pgtest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestEveryVersion starts a cluster of each installed major version (or
// those $PGSPRINT_TEST_PG_VERSIONS lists), checks that the cluster reports
// the version it was asked for and, under the full matrix (make
// test-matrix, make test-long), loads the torture schema into it, so that
// a broken install or a torture.sql feature an old server lacks shows up
// here, by version, rather than in a round trip. Under make test the load
// is TestCrossVersion's (internal/clone), which loads the torture schema
// into a cluster of each of these versions: doing it here too cost a
// torture load per version.
func TestEveryVersion(t *testing.T) {
	load := os.Getenv("PGSPRINT_TEST_PG_MATRIX") == "full"
	versions := Versions()
	if len(versions) < 2 {
		load = true // no cross-version test runs
	}
	if len(versions) == 0 {
		RequireBinaries(t)
		t.Skip("no PostgreSQL versions found")
	}
	for _, v := range versions {
		t.Run(strconv.Itoa(v), func(t *testing.T) {
			t.Parallel()
			dir, err := BinDirFor(v)
			if err != nil {
				t.Fatal(err)
			}
			c := New(t, Options{BinDir: dir})
			if c.Version() != v {
				t.Fatalf("cluster from %s is version %d, want %d", dir, c.Version(), v)
			}
			if !load {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := c.CreateDB(ctx, "torture"); err != nil {
				t.Fatal(err)
			}
			LoadTorture(t, c, "torture")
		})
	}
}
