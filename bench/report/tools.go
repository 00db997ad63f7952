package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// optDir is where scripts/install-pg-versions.sh puts PostgreSQL versions
// installed from wheels, one NN/bin per major version.
const optDir = "/opt/pgsprint-pg"

// pgTools is the PostgreSQL installation the matrix runs with.
type pgTools struct {
	dir     string // pg_dump, pg_restore, psql
	major   int
	version string
	cluster string // initdb, pg_ctl, postgres for the throwaway cluster

	supported map[string]bool // compression methods pg_dump accepts
}

func (t pgTools) bin(name string) string { return filepath.Join(t.dir, name) }

// probeDir is pgbin.Probe plus psql, which the matrix needs to restore
// plain dumps.
func probeDir(ctx context.Context, dir string) (pgbin.Tools, bool) {
	if _, err := os.Stat(filepath.Join(dir, "psql")); err != nil {
		return pgbin.Tools{}, false
	}
	return pgbin.Probe(ctx, dir)
}

// findPG picks the pg_dump for the matrix: explicit if given, else
// $PGSPRINT_PG_BIN alone if set, else among pgbin.Installed and
// /opt/pgsprint-pg/NN/bin the newest of those that support the most
// compression methods (a build without lz4 and zstd would leave most of the
// matrix empty). The cluster runs the same version when its directory has
// initdb, so that pg_dump is never older than the server. The notes say
// which installations were passed over and why.
func findPG(ctx context.Context, explicit string) (pgTools, []string, error) {
	var all []pgbin.Tools
	switch {
	case explicit != "":
		t, ok := probeDir(ctx, explicit)
		if !ok {
			return pgTools{}, nil, fmt.Errorf("no pg_dump, pg_restore and psql in %s", explicit)
		}
		all = append(all, t)
	case os.Getenv(pgbin.EnvBinDir) != "":
		all = pgbin.Installed(ctx)
	default:
		all = pgbin.Installed(ctx)
		dirs, _ := filepath.Glob(filepath.Join(optDir, "*", "bin"))
		for _, d := range dirs {
			if t, ok := probeDir(ctx, d); ok {
				all = append(all, t)
			}
		}
	}
	if len(all) == 0 {
		return pgTools{}, nil, fmt.Errorf("no pg_dump/pg_restore/psql found: install PostgreSQL or set %s", pgbin.EnvBinDir)
	}
	cands := make([]pgTools, len(all))
	for i, t := range all {
		cands[i] = pgTools{dir: t.Dir, major: t.Major, version: t.Version}
		cands[i].supported = cands[i].methods(ctx)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if a, b := len(cands[i].supported), len(cands[j].supported); a != b {
			return a > b
		}
		return cands[i].major > cands[j].major
	})
	t := cands[0]
	var notes []string
	for _, c := range cands[1:] {
		if c.major > t.major {
			notes = append(notes, fmt.Sprintf("pg_dump %s in %s was passed over: it supports only %s compression, pg_dump %s supports %s",
				c.version, c.dir, methodList(c.supported), t.version, methodList(t.supported)))
		}
	}
	if _, err := os.Stat(filepath.Join(t.dir, "initdb")); err == nil {
		t.cluster = t.dir
	} else {
		dir, err := pgtest.FindBinDir("")
		if err != nil {
			return pgTools{}, nil, fmt.Errorf("server binaries for the cluster: %w", err)
		}
		t.cluster = dir
	}
	return t, notes, nil
}

// compressionSpec is pg_dump's -Z argument: METHOD:LEVEL from PostgreSQL 16
// on, a gzip level digit before.
func (t pgTools) compressionSpec(method string, level int) string {
	if t.major < 16 {
		if method == "none" {
			return "0"
		}
		return strconv.Itoa(level)
	}
	if method == "none" {
		return "none"
	}
	return fmt.Sprintf("%s:%d", method, level)
}

// methods returns the compression methods this pg_dump accepts: gzip only
// before PostgreSQL 16; lz4 and zstd from 16 on when built with them. pg_dump
// checks -Z before it connects, so asking it to dump from a server that
// does not exist tells a refused method (its message) from an accepted one
// (a connection error).
func (t pgTools) methods(ctx context.Context) map[string]bool {
	ok := map[string]bool{}
	for _, m := range []string{"gzip", "lz4", "zstd"} {
		if t.major < 16 && m != "gzip" {
			continue
		}
		out, _ := exec.CommandContext(ctx, t.bin("pg_dump"), "-Fc", "--schema-only", "-Z", t.compressionSpec(m, 1),
			"-d", "host=/nonexistent-pgsprint-bench port=1 connect_timeout=1").CombinedOutput()
		if !strings.Contains(string(out), "compression") {
			ok[m] = true
		}
	}
	return ok
}

// methodList names the methods in a fixed order.
func methodList(m map[string]bool) string {
	var out []string
	for _, k := range []string{"gzip", "lz4", "zstd"} {
		if m[k] {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "no"
	}
	return strings.Join(out, ", ")
}

// hasSubcommand reports whether `prog sub --help` succeeds and describes
// sub, so a pgsprint built before `clone` existed is told apart.
func hasSubcommand(ctx context.Context, prog, sub string) bool {
	out, err := exec.CommandContext(ctx, prog, sub, "--help").CombinedOutput()
	return err == nil && strings.Contains(string(out), sub)
}

// decompressors finds the command-line tools that decompress a plain
// pg_dump for psql: gzip, lz4 and zstd.
func decompressors() map[string]string {
	out := map[string]string{}
	for _, m := range []string{"gzip", "lz4", "zstd"} {
		if p, err := exec.LookPath(m); err == nil {
			out[m] = p
		}
	}
	return out
}
