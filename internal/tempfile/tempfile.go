// Package tempfile creates pgsprint's temporary files (partial archives,
// extracted schema dumps, pg_restore lists, spill files) under names that
// carry the creating process's id, and removes the ones a killed run left
// behind. A run that ends in any way pgsprint survives removes its own
// files; SIGKILL, a crash or a power loss cannot, so the next run in the
// same place finds files whose creator is gone and removes them.
package tempfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the temporary files pgsprint creates in the temp directory
// (os.TempDir(), or --spill-dir for spill files), as patterns for Create:
// "*" becomes "<pid>-<random>".
const (
	Schema    = "pgsprint-schema-*.dump"   // pg_dump custom archive extracted for pg_restore
	Selection = "pgsprint-selection-*.txt" // pg_restore --use-list of a partial restore
	List      = "pgsprint-list-*.txt"      // pg_restore --use-list of one step
	Spill     = "pgsprint-spill-*"         // data of restore -f - waiting for a connection
	Stdin     = "pgsprint-stdin-*.pgs"     // an archive read from standard input, for --to-sql
	Demo      = "pgsprint-demo-*"          // pgsprint demo's work directory
)

// InTempDir are the patterns of files created in the temp directory.
func InTempDir() []string { return []string{Schema, Selection, List, Stdin, Demo} }

// Partial is the pattern of the file a dump writes before renaming it to
// path: hidden, in the same directory (a rename across file systems is
// not atomic), named after the archive.
func Partial(path string) (dir, pattern string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	return dir, "." + base + ".partial-*"
}

// Create creates a new file in dir (os.TempDir() when empty) with mode
// 0600, named after pattern with "*" replaced by this process's id, a
// dash and a random number, so that a later run can tell whether its
// creator is still alive.
func Create(dir, pattern string) (*os.File, error) {
	prefix, suffix, err := split(pattern)
	if err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, prefix+strconv.Itoa(os.Getpid())+"-*"+suffix)
}

// MkdirTemp is Create for a directory (mode 0700).
func MkdirTemp(dir, pattern string) (string, error) {
	prefix, suffix, err := split(pattern)
	if err != nil {
		return "", err
	}
	return os.MkdirTemp(dir, prefix+strconv.Itoa(os.Getpid())+"-*"+suffix)
}

func split(pattern string) (prefix, suffix string, err error) {
	prefix, suffix, ok := strings.Cut(pattern, "*")
	if !ok || strings.Contains(suffix, "*") || strings.ContainsRune(pattern, os.PathSeparator) {
		return "", "", fmt.Errorf("tempfile: bad pattern %q", pattern)
	}
	return prefix, suffix, nil
}

// Stale is a file a killed run left behind.
type Stale struct {
	Path string
	PID  int
}

// Sweep removes from dir (os.TempDir() when empty) the files and
// directories matching one of patterns (as given to Create) whose creating
// process no longer exists and which belong to this process's user, and
// returns what it removed. A file whose process still runs (another
// pgsprint, or an unrelated process that reuses a dead run's id) is left
// alone: removing it could break a running dump. Files of other users and
// names that do not carry a pid are never touched. A directory that cannot
// be read is no error: there is nothing of ours to clean.
func Sweep(dir string, patterns ...string) ([]Stale, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, nil
		}
		return nil, fmt.Errorf("look for stale temporary files in %s: %w", dir, err)
	}
	self := os.Getpid()
	var removed []Stale
	var errs []error
	for _, e := range entries {
		pid, ok := creator(e.Name(), patterns)
		if !ok || pid == self || alive(pid) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Lstat(path)
		if err != nil || !ownedByUs(info) || info.Mode()&fs.ModeSymlink != 0 {
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			errs = append(errs, fmt.Errorf("remove stale temporary file: %w", err))
			continue
		}
		removed = append(removed, Stale{Path: path, PID: pid})
	}
	return removed, errors.Join(errs...)
}

// creator returns the pid in name if name is one Create made from one of
// patterns: prefix, decimal pid, "-", random digits, suffix.
func creator(name string, patterns []string) (int, bool) {
	for _, p := range patterns {
		prefix, suffix, err := split(p)
		if err != nil || !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) || len(name) < len(prefix)+len(suffix) {
			continue
		}
		middle := name[len(prefix) : len(name)-len(suffix)]
		pidText, random, ok := strings.Cut(middle, "-")
		if !ok || !digits(pidText) || !digits(random) {
			continue
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		return pid, true
	}
	return 0, false
}

// digits reports whether s is one or more ASCII digits: no sign, no space.
func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
