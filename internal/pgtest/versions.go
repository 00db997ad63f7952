package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// EnvVersions names the environment variable that restricts the versions
// the cross-version tests use, as a comma-separated list of majors ("15,18"),
// so that CI can run a small matrix and `make test-matrix` a full one.
const EnvVersions = "PGSPRINT_TEST_PG_VERSIONS"

// installs maps each installed major version to the bin directory of a
// complete server installation (initdb, pg_ctl, postgres, psql, pg_dump,
// pg_restore). Where one major is installed twice, the first directory in
// pgbin.VersionDirs order wins (Debian's packages before the wheels).
func installs() map[int]string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs := pgbin.VersionDirs()
	if env := os.Getenv(EnvBinDir); env != "" {
		dirs = append([]string{env}, dirs...)
	}
	found := map[int]string{}
	for _, d := range dirs {
		complete := true
		for _, p := range []string{"initdb", "pg_ctl", "postgres", "psql"} {
			if _, err := os.Stat(filepath.Join(d, p)); err != nil {
				complete = false
			}
		}
		if !complete {
			continue
		}
		t, ok := pgbin.Probe(ctx, d)
		if !ok {
			continue
		}
		if _, dup := found[t.Major]; !dup {
			found[t.Major] = d
		}
	}
	return found
}

// Versions returns the installed major versions a cluster can be started
// with, oldest first, for tests that run across versions. When
// $PGSPRINT_TEST_PG_VERSIONS is set, only the versions it lists (and that
// are installed) are returned.
func Versions() []int {
	all := installs()
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

// BinDirFor returns the bin directory of an installed PostgreSQL major
// version, for Options.BinDir. The error names what is installed, so that a
// missing version is obvious in a test's output.
func BinDirFor(major int) (string, error) {
	all := installs()
	if d, ok := all[major]; ok {
		return d, nil
	}
	var have []string
	for v, d := range all {
		have = append(have, fmt.Sprintf("%d (%s)", v, d))
	}
	sort.Strings(have)
	return "", fmt.Errorf("%w: PostgreSQL %d is not installed (have: %s); run scripts/install-pg-versions.sh", ErrNoBinaries, major, strings.Join(have, ", "))
}
