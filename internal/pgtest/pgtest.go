// Package pgtest runs throwaway PostgreSQL servers for tests and provides the
// comparison helpers (schema dumps, data fingerprints) that every round-trip
// test of pgsprint relies on.
//
// A dump/restore tool can only be trusted when it is exercised against a real
// server: the catalog, COPY quoting and large-object semantics are too subtle
// to mock. This package therefore starts real postmasters from the installed
// PostgreSQL binaries (through internal/pgctl, which `pgsprint demo` uses
// too), in temporary directories, one per test (or per test package), and
// tears them down afterwards. Only tests and benchmarks import it: it links
// "testing" and the torture schema, which the pgsprint binary must not carry.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgctl"
)

// Instance is a throwaway PostgreSQL server (see pgctl.Instance); the alias
// keeps the tests' vocabulary while the product uses internal/pgctl.
type Instance = pgctl.Instance

// Options configures New and Start (see pgctl.Options).
type Options = pgctl.Options

// SuperuserName is the bootstrap superuser of every cluster.
const SuperuserName = pgctl.SuperuserName

// SuperuserPassword is the password of SuperuserName over TCP; tests pass it
// to whatever they are testing (a flag, PGPASSWORD, a config field).
const SuperuserPassword = pgctl.SuperuserPassword

// EnvBinDir names the environment variable that selects the PostgreSQL bin
// directory when Options.BinDir is empty.
const EnvBinDir = pgctl.EnvBinDir

// EnvRequire names the environment variable that, when set to a non-empty
// value, turns the "no PostgreSQL binaries" skip of New into a failure, so
// that CI cannot silently pass by skipping every database test.
const EnvRequire = "PGSPRINT_TEST_REQUIRE_PG"

// EnvDir names the environment variable that, when set, is the directory
// the test clusters' directories are made in (pgctl.Options.Dir). Unset
// or empty, they go to /dev/shm when it has room (memDir), else to
// $TMPDIR: a disk's file system costs the test servers a fifth of their
// CPU (creating, copying and removing the files of hundreds of
// databases; internal/follow's tests: 44 CPU-seconds on ext4, 26 on
// /dev/shm). PGSPRINT_TEST_DIR=/tmp keeps them on disk.
const EnvDir = "PGSPRINT_TEST_DIR"

// memDirFree is the room /dev/shm must have for the test clusters to be
// made there: every cluster of a `make test` at once, with the largest
// tests' data (a few GiB), and room to spare for the rest of memory.
const memDirFree = 8 << 30

// clusterDir is where a test cluster's directory is made: EnvDir, else
// /dev/shm when it is a writable directory with memDirFree bytes free,
// else "" ($TMPDIR).
func clusterDir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	const mem = "/dev/shm"
	var st syscall.Statfs_t
	if err := syscall.Statfs(mem, &st); err != nil || int64(st.Bavail)*int64(st.Bsize) < memDirFree {
		return ""
	}
	if syscall.Access(mem, 2 /* W_OK */) != nil {
		return ""
	}
	return mem
}

// EnvVersions names the environment variable that restricts the versions
// the cross-version tests use, as a comma-separated list of majors ("15,18"),
// so that CI can run a small matrix and `make test-matrix` a full one.
const EnvVersions = "PGSPRINT_TEST_PG_VERSIONS"

// ErrNoBinaries is returned (wrapped) when no PostgreSQL installation can be
// found. New turns it into a skip, because a developer machine without
// PostgreSQL should still be able to run the rest of the test suite.
var ErrNoBinaries = pgctl.ErrNoBinaries

// Start creates and starts a cluster outside a test (benchmarks); the
// caller must Close it.
func Start(ctx context.Context, opts Options) (*Instance, error) { return pgctl.Start(ctx, opts) }

// FindBinDir returns the PostgreSQL bin directory to use (see
// pgctl.FindBinDir for the search order).
func FindBinDir(explicit string) (string, error) { return pgctl.FindBinDir(explicit) }

// BinDirFor returns the bin directory of an installed major version.
func BinDirFor(major int) (string, error) { return pgctl.BinDirFor(major) }

// KeywordConnString renders params as a libpq keyword/value string.
func KeywordConnString(params map[string]string) string { return pgctl.KeywordConnString(params) }

// QuoteConnValue quotes a value for a libpq keyword/value connection string.
func QuoteConnValue(v string) string { return pgctl.QuoteConnValue(v) }

// New starts a cluster for a test and stops it when the test ends. It skips
// the test when no PostgreSQL binaries exist at all (unless EnvRequire is set)
// and fails it on any other error, because a broken harness must not look
// like a passing test.
func New(t testing.TB, opts ...Options) *Instance {
	t.Helper()
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		t.Fatalf("pgtest.New: at most one Options value, got %d", len(opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := startFromTemplate(ctx, o)
	if err != nil {
		skipIfNoBinaries(t, err)
		t.Fatalf("pgtest: starting cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("pgtest: closing cluster: %v", err)
		}
	})
	return c
}

// startFromTemplate starts a cluster copied from its installation's
// template data directory (see template).
func startFromTemplate(ctx context.Context, o Options) (*Instance, error) {
	binDir, err := pgctl.FindBinDir(o.BinDir)
	if err != nil {
		return nil, err
	}
	o.BinDir = binDir
	if o.Dir == "" {
		o.Dir = clusterDir()
	}
	if o.Template, err = template(ctx, binDir); err != nil {
		return nil, err
	}
	return pgctl.Start(ctx, o)
}

// NewStandby starts a streaming hot standby of primary for a test (see
// pgctl.Instance.StartStandby) and stops it when the test ends, so that
// dumping from a read replica can be tested.
func NewStandby(t testing.TB, primary *Instance) *Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := primary.StartStandby(ctx)
	if err != nil {
		t.Fatalf("pgtest: starting standby: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: closing standby: %v", err)
		}
	})
	return s
}

// RequireBinaries skips the test when no PostgreSQL binaries exist (unless
// EnvRequire is set, then it fails it), for tests that start clusters
// through something other than New.
func RequireBinaries(t testing.TB) {
	t.Helper()
	if _, err := pgctl.FindBinDir(""); err != nil {
		skipIfNoBinaries(t, err)
		t.Fatal(err)
	}
}

func skipIfNoBinaries(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinaries) && os.Getenv(EnvRequire) == "" {
		t.Skipf("skipping: %v (install PostgreSQL or set %s; set %s=1 to make this a failure)", err, EnvBinDir, EnvRequire)
	}
}

// Versions returns the installed major versions a cluster can be started
// with, oldest first, for tests that run across versions. When
// $PGSPRINT_TEST_PG_VERSIONS is set, only the versions it lists (and that
// are installed) are returned.
func Versions() []int {
	all := pgctl.Installed()
	want := map[int]bool{}
	if env := os.Getenv(EnvVersions); env != "" {
		for _, f := range strings.Split(env, ",") {
			var v int
			if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &v); err == nil {
				want[v] = true
			}
		}
	}
	var vs []int
	for v := range all {
		if len(want) == 0 || want[v] {
			vs = append(vs, v)
		}
	}
	sort.Ints(vs)
	return vs
}
