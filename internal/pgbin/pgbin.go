// Package pgbin finds the PostgreSQL client programs (pg_dump, pg_restore,
// psql) that pgsprint drives for DDL, choosing a version that can handle the
// servers involved.
package pgbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// EnvBinDir names a directory that overrides discovery.
const EnvBinDir = "PGSPRINT_PG_BIN"

// EnvInstallRoot names the directory holding extra major versions as NN/bin
// (scripts/install-pg-versions.sh puts them there), so that a machine can
// carry several majors side by side, as Debian's /usr/lib/postgresql does.
const EnvInstallRoot = "PGSPRINT_PG_ROOT"

// DefaultInstallRoot is the EnvInstallRoot used when it is unset.
const DefaultInstallRoot = "/opt/pgsprint-pg"

// Tools is one directory of PostgreSQL client programs of one version.
type Tools struct {
	Dir     string
	Major   int
	Version string // as printed by pg_dump --version, e.g. "15.18"
}

// PgDump, PgRestore and Psql return the paths of the programs.
func (t Tools) PgDump() string    { return filepath.Join(t.Dir, "pg_dump") }
func (t Tools) PgRestore() string { return filepath.Join(t.Dir, "pg_restore") }
func (t Tools) Psql() string      { return filepath.Join(t.Dir, "psql") }

// PgDumpall is the path of pg_dumpall, which whole-server dumps run for
// the globals (roles, tablespaces).
func (t Tools) PgDumpall() string { return filepath.Join(t.Dir, "pg_dumpall") }

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// Probe reads the version of the pg_dump in dir; ok is false when dir has
// no working pg_dump and pg_restore. Exported so that the test harness
// names versions exactly as discovery does.
func Probe(ctx context.Context, dir string) (tools Tools, ok bool) {
	for _, p := range []string{"pg_dump", "pg_restore"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return Tools{}, false
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "pg_dump"), "--version").Output()
	if err != nil {
		return Tools{}, false
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return Tools{}, false
	}
	major, _ := strconv.Atoi(m[1])
	v := m[1]
	if m[2] != "" {
		v += "." + m[2]
	}
	return Tools{Dir: dir, Major: major, Version: v}, true
}

// VersionDirs returns the bin directories of side-by-side installations of
// several major versions: Debian's /usr/lib/postgresql/N/bin, then
// $PGSPRINT_PG_ROOT/N/bin (default /opt/pgsprint-pg/N/bin). Both discovery
// and the test harness look there, so that they agree on what is installed.
func VersionDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	root := os.Getenv(EnvInstallRoot)
	if root == "" {
		root = DefaultInstallRoot
	}
	extra, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	return append(dirs, extra...)
}

// candidates lists directories to look in: PGSPRINT_PG_BIN alone if set;
// else VersionDirs, pg_config --bindir, and PATH.
func candidates(ctx context.Context) []string {
	if d := os.Getenv(EnvBinDir); d != "" {
		return []string{d}
	}
	dirs := VersionDirs()
	if out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("pg_dump"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	return dirs
}

// Installed returns every distinct installation found, oldest first.
func Installed(ctx context.Context) []Tools {
	return installedWith(ctx, Probe)
}

// installedWith is Installed, asking each directory with probe.
func installedWith(ctx context.Context, probe func(context.Context, string) (Tools, bool)) []Tools {
	seen := map[string]bool{}
	var all []Tools
	for _, d := range candidates(ctx) {
		abs, err := filepath.Abs(d)
		if err != nil || seen[abs] {
			continue
		}
		seen[abs] = true
		if t, ok := probe(ctx, abs); ok {
			all = append(all, t)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Major < all[j].Major })
	return all
}

// Find returns the oldest installation whose major version is at least
// minMajor: pg_dump must be at least as new as the server it reads, and the
// oldest such one writes archives the most pg_restore versions can read.
// It asks the directories named for their major version first (see
// Finder.Find), so that a run does not start every pg_dump installed.
func Find(ctx context.Context, minMajor int) (Tools, error) {
	var f Finder
	return f.Find(ctx, minMajor)
}

// Finder is Installed and Find for a run that chooses tools many times
// (dump, restore and clone --all, once per database): it runs each
// directory's pg_dump --version at most once, and looks for the
// installations once, on first use, instead of each time. A run makes one
// and hands it to everything that chooses tools; a nil Finder looks every
// time, as Installed does.
type Finder struct {
	mu     sync.Mutex
	probed map[string]probed // by directory
	all    []Tools
	looked bool // all is every installation found
}

// probed is what Probe said of a directory.
type probed struct {
	tools Tools
	ok    bool
}

// Installed is Installed, looked for once.
func (f *Finder) Installed(ctx context.Context) []Tools {
	if f == nil {
		return Installed(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.installed(ctx)
}

// installed is Installed with f.mu held.
func (f *Finder) installed(ctx context.Context) []Tools {
	if !f.looked {
		f.all = installedWith(ctx, f.probe)
		f.looked = true
	}
	return f.all
}

// probe is Probe, run once per directory; f.mu is held.
func (f *Finder) probe(ctx context.Context, dir string) (Tools, bool) {
	if p, ok := f.probed[dir]; ok {
		return p.tools, p.ok
	}
	t, ok := Probe(ctx, dir)
	if f.probed == nil {
		f.probed = map[string]probed{}
	}
	f.probed[dir] = probed{t, ok}
	return t, ok
}

// Find is Find without starting every pg_dump installed. The directories
// named for their major version (Debian's /usr/lib/postgresql/N/bin and
// $PGSPRINT_PG_ROOT/N/bin) are asked first, from minMajor up: the first
// whose pg_dump says it is that version is the answer, one pg_dump
// --version in all. Only when none of them will do, or one is not the
// version its name says, are all installations looked for (pg_config
// --bindir and PATH too), as Installed does. Each look took about 35 ms of
// CPU (a pg_dump --version of every major, and Debian's pg_config, a
// script of four programs), paid by every run.
func (f *Finder) Find(ctx context.Context, minMajor int) (Tools, error) {
	if f == nil {
		f = &Finder{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if os.Getenv(EnvBinDir) == "" {
		if t, ok := f.findNamed(ctx, minMajor); ok {
			return t, nil
		}
	}
	return findIn(f.installed(ctx), minMajor)
}

// findNamed is Find among the directories named for their major version
// (VersionDirs), oldest first from minMajor up; ok is false when none of
// them has a working pg_dump of at least minMajor, or the first that has
// one is not the version its name says. f.mu is held.
func (f *Finder) findNamed(ctx context.Context, minMajor int) (Tools, bool) {
	type named struct {
		dir   string
		major int
	}
	var dirs []named
	for _, d := range VersionDirs() {
		if major, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil && major >= minMajor {
			dirs = append(dirs, named{d, major})
		}
	}
	sort.SliceStable(dirs, func(i, j int) bool { return dirs[i].major < dirs[j].major })
	for _, d := range dirs {
		abs, err := filepath.Abs(d.dir)
		if err != nil {
			continue
		}
		t, ok := f.probe(ctx, abs)
		if !ok {
			continue
		}
		return t, t.Major == d.major
	}
	return Tools{}, false
}

// findIn is Find among installations already listed by Installed.
func findIn(all []Tools, minMajor int) (Tools, error) {
	for _, t := range all {
		if t.Major >= minMajor {
			return t, nil
		}
	}
	if len(all) == 0 {
		return Tools{}, fmt.Errorf("no pg_dump/pg_restore found: install PostgreSQL %d client programs or set %s", minMajor, EnvBinDir)
	}
	var have []string
	for _, t := range all {
		have = append(have, t.Version+" in "+t.Dir)
	}
	return Tools{}, fmt.Errorf("PostgreSQL %d or newer client programs are needed (found only %s): install them or set %s", minMajor, strings.Join(have, ", "), EnvBinDir)
}

// Newest returns the newest installation: the one to compare two servers
// with, since it can dump every older server and dumps both the same way.
func Newest(ctx context.Context) (Tools, error) {
	all := Installed(ctx)
	if len(all) == 0 {
		return Tools{}, fmt.Errorf("no pg_dump found: install PostgreSQL client programs or set %s", EnvBinDir)
	}
	return all[len(all)-1], nil
}

// Command is exec.CommandContext for a PostgreSQL client program (pg_dump,
// pg_dumpall, pg_restore, psql) that must not outlive pgsprint: killed with
// its context, and by the kernel when pgsprint dies (DieWithParent), so
// that a failed or killed run leaves no pg_dump holding a snapshot's locks
// and no pg_restore racing a resumed run.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	DieWithParent(cmd)
	return cmd
}
