package pgctl

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// Installed maps each installed major version to the bin directory of a
// complete server installation (initdb, pg_ctl, postgres, psql, pg_dump,
// pg_restore). Where one major is installed twice, the first directory in
// pgbin.VersionDirs order wins (Debian's packages before the wheels).
func Installed() map[int]string {
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

// BinDirFor returns the bin directory of an installed PostgreSQL major
// version, for Options.BinDir. The error names what is installed, so that a
// missing version is obvious in a test's output.
func BinDirFor(major int) (string, error) {
	all := Installed()
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

// FindBinDir returns the PostgreSQL bin directory to use. The search order is
// explicit, then $PGSPRINT_TEST_PG_BIN, then the newest
// /usr/lib/postgresql/N/bin (Debian/Ubuntu layout), then the newest of
// pgbin.VersionDirs (the extra majors), then `pg_config --bindir`, then the
// directory of initdb on PATH. Every candidate must contain initdb, so that a
// half-installed client-only package is not picked.
func FindBinDir(explicit string) (string, error) {
	check := func(dir, origin string) (string, error) {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
			return "", fmt.Errorf("pgctl: bin dir %q (from %s) has no initdb: %w", dir, origin, err)
		}
		return dir, nil
	}
	if explicit != "" {
		return check(explicit, "Options.BinDir")
	}
	if env := os.Getenv(EnvBinDir); env != "" {
		return check(env, "$"+EnvBinDir)
	}
	if dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin"); len(dirs) > 0 {
		type cand struct {
			dir string
			ver float64
		}
		var cands []cand
		for _, d := range dirs {
			v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
			if err != nil {
				continue
			}
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				cands = append(cands, cand{d, v})
			}
		}
		sort.Slice(cands, func(i, j int) bool { return cands[i].ver > cands[j].ver })
		if len(cands) > 0 {
			return cands[0].dir, nil
		}
	}
	// Then the newest of the side-by-side installs under pgbin's install
	// root (scripts/install-pg-versions.sh).
	if all := Installed(); len(all) > 0 {
		newest := 0
		for v := range all {
			newest = max(newest, v)
		}
		return all[newest], nil
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			dir := strings.TrimSpace(string(out))
			if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
				return dir, nil
			}
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		// Resolve symlinks: a lone /usr/local/bin/initdb link does not
		// bring pg_dump and psql of the same version along.
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			initdb = real
		}
		return filepath.Dir(initdb), nil
	}
	return "", fmt.Errorf("%w (looked at $%s, /usr/lib/postgresql/*/bin, $%s/*/bin, pg_config --bindir, PATH)", ErrNoBinaries, EnvBinDir, pgbin.EnvInstallRoot)
}
