package pgtest

// Helpers of the tests that watch a run from the server's side: the
// sessions pgsprint holds (its application_name), what they wait for, the
// files a failed run must not leave, and the seeded repetitions of a
// randomized test. Used by dump's, clone's and restore's tests, which
// call the packages directly where cmd/pgsprint's tests ran the binary.

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvSeed names the environment variable that replays a randomized
// run of the kill and DDL tests: the seed their log prints.
const EnvSeed = "PGSPRINT_RESUME_SEED"

// Seeded returns how many iterations a randomized test runs (n, or the
// value of the environment variable iterVar when set) and its random
// source, whose seed it logs (EnvSeed replays it).
func Seeded(t testing.TB, iterVar string, n int) (int, *rand.Rand) {
	t.Helper()
	if v, err := strconv.Atoi(os.Getenv(iterVar)); err == nil && v > 0 {
		n = v
	}
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv(EnvSeed), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (%s replays it)", seed, EnvSeed)
	return n, rand.New(rand.NewPCG(seed, 0))
}

// Repeat is how many times a repeated test runs its cases: n under `make
// test`, nLong under `make test-long` (-tags long).
func Repeat(n, nLong int) int {
	if Long {
		return nLong
	}
	return n
}

// WaitForCopy returns the pid of a pgsprint backend running a query like
// pattern (SQL LIKE), once one does, polling through admin.
func WaitForCopy(t testing.TB, admin *pgx.Conn, pattern string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var pid int
		err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE application_name = 'pgsprint' AND state = 'active' AND query LIKE $1 LIMIT 1`, pattern).Scan(&pid)
		if err == nil {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no pgsprint COPY seen on the server")
	return 0
}

// NoSessionsLeft fails if pgsprint sessions (an open snapshot transaction
// above all) outlive the run for more than a few seconds.
func NoSessionsLeft(t testing.TB, admin *pgx.Conn) {
	t.Helper()
	var n int
	for range 50 {
		if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgsprint'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%d pgsprint sessions still on the server after the run ended", n)
}

// NoPartialFiles fails if dir holds anything but the names in keep: a
// failed dump leaves no file, not even its temporary one.
func NoPartialFiles(t testing.TB, dir string, keep ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		found := false
		for _, k := range keep {
			found = found || e.Name() == k
		}
		if !found {
			t.Errorf("unexpected file left in %s: %s", dir, e.Name())
		}
	}
}

// RequireOneLineError fails unless err is one line mentioning sub (case
// aside): what the binary prints after "pgsprint: error: ".
func RequireOneLineError(t testing.TB, err error, sub string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", sub)
	}
	t.Logf("error: %v", err)
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error is more than one line:\n%v", err)
	}
	if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(sub)) {
		t.Errorf("error does not mention %q: %v", sub, err)
	}
}

// SmallLockTable is the settings of a server whose shared lock table is
// small: locks slots per transaction, 10 connections, and as few
// background processes as will start.
func SmallLockTable(locks int) map[string]string {
	return map[string]string{
		"max_locks_per_transaction": strconv.Itoa(locks), "max_connections": "10", "max_worker_processes": "2",
		"max_wal_senders": "0", "autovacuum_max_workers": "1", "max_prepared_transactions": "0",
	}
}

// Scalar runs a query returning one value in the database at conn, as
// text.
func Scalar(t testing.TB, conn, sql string) string {
	t.Helper()
	var v string
	WithConn(t, conn, func(ctx context.Context, cn *pgx.Conn) {
		if err := cn.QueryRow(ctx, "SELECT ("+sql+")::text").Scan(&v); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	})
	return v
}
