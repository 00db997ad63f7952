package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/bench/results"
)

// variant is one way to copy a database: a backup command writing a file
// (or directory) and a restore command reading it, or one clone command.
// A restore of two commands is a pipeline (decompress | psql).
type variant struct {
	row     results.Row // Tool, Format, Compression, Level
	skip    string      // why it does not run here, if it does not
	ext     string      // backup file name suffix
	backup  func(src, path string) benchkit.Command
	restore func(path, dst string) []benchkit.Command
	clone   func(src, dst string) benchkit.Command
	// stored is where the bytes of a backup written "at" path are, to
	// measure and remove (nil: path itself; an s3:// row's object file).
	stored func(path string) string
}

// setup is what the variants need to know about this run.
type setup struct {
	pg         pgTools
	jobs       int
	pgsprint   string
	hasClone   bool
	pgcopydb   string // empty when not installed
	workDir    string
	decompress map[string]string // method -> CLI for plain dumps
	dumpLevels codecLevels
	ownLevels  codecLevels        // pgsprint's
	s3         *benchkit.S3Server // the s3:// rows' server; nil skips them
	s3Skip     string             // why they are skipped
}

// pgsprintEnv points pgsprint at the matrix's pg_dump and pg_restore.
func (s setup) pgsprintEnv() []string { return []string{"PGSPRINT_PG_BIN=" + s.pg.dir} }

// variants lists every run of one dataset: pg_dump's formats times the
// compressions it supports, pgsprint's codecs and levels, then the clones.
func (s setup) variants() []variant {
	j := strconv.Itoa(s.jobs)
	var out []variant
	type format struct {
		name, flag, ext string
		compress        bool
	}
	for _, f := range []format{{"plain", "p", ".sql", true}, {"custom", "c", ".dump", true}, {"directory", "d", ".dir", true}, {"tar", "t", ".tar", false}} {
		comps := codecLevels{{method: "none", levels: []int{0}}}
		for _, ml := range s.dumpLevels {
			if f.compress && ml.method != "none" {
				comps = append(comps, ml)
			}
		}
		for _, ml := range comps {
			for _, level := range ml.levels {
				out = append(out, s.pgDumpVariant(f.name, f.flag, f.ext, ml.method, level, j))
			}
		}
	}
	for _, ml := range s.ownLevels {
		for _, level := range ml.levels {
			spec := ml.method
			if level != 0 {
				spec += ":" + strconv.Itoa(level)
			}
			out = append(out, variant{
				row: results.Row{Tool: "pgsprint", Format: "pgsprint", Compression: ml.method, Level: level},
				ext: ".pgs",
				backup: func(src, path string) benchkit.Command {
					return benchkit.Command{Args: []string{s.pgsprint, "dump", "-q", "-j", j, "-Z", spec, "-f", path, "-d", src}, Env: s.pgsprintEnv()}
				},
				restore: func(path, dst string) []benchkit.Command {
					return []benchkit.Command{{Args: []string{s.pgsprint, "restore", "-q", "--no-analyze", "-j", j, "-f", path, "-d", dst}, Env: s.pgsprintEnv()}}
				},
			})
		}
	}
	out = append(out, s.s3Variant(j))
	clone := variant{row: results.Row{Tool: "pgsprint clone", Format: "clone"},
		clone: func(src, dst string) benchkit.Command {
			return benchkit.Command{Args: []string{s.pgsprint, "clone", "--source", src, "--target", dst, "-j", j}, Env: s.pgsprintEnv()}
		}}
	if !s.hasClone {
		clone.skip = "skipped: this pgsprint has no clone command (`pgsprint clone --help` fails)"
	}
	out = append(out, clone)
	pgcopydb := variant{row: results.Row{Tool: "pgcopydb clone", Format: "clone"},
		clone: func(src, dst string) benchkit.Command {
			return benchkit.Command{
				Args: []string{s.pgcopydb, "clone", "--source", src, "--target", dst, "--table-jobs", j, "--index-jobs", j,
					"--split-tables-larger-than", "100MB", "--dir", filepath.Join(s.workDir, "pgcopydb"), "--restart"},
				Env: []string{"PATH=" + s.pg.dir + string(os.PathListSeparator) + os.Getenv("PATH")},
			}
		}}
	if s.pgcopydb == "" {
		pgcopydb.skip = "skipped: pgcopydb is not installed (Debian package pgcopydb)"
	}
	return append(out, pgcopydb)
}

// pgDumpVariant is pg_dump -F<flag> -Z <method:level>, restored with psql
// (plain, through the method's decompressor) or pg_restore (-j N but for
// tar, which pg_restore cannot restore in parallel).
func (s setup) pgDumpVariant(format, flag, ext, method string, level int, j string) variant {
	v := variant{row: results.Row{Tool: "pg_dump", Format: format, Compression: method, Level: level}, ext: ext}
	if method != "none" && !s.pg.supported[method] {
		v.skip = fmt.Sprintf("skipped: pg_dump %s in %s was built without %s", s.pg.version, s.pg.dir, method)
		return v
	}
	spec := s.pg.compressionSpec(method, level)
	v.backup = func(src, path string) benchkit.Command {
		args := []string{s.pg.bin("pg_dump"), "-F" + flag, "-Z", spec, "-f", path, "-d", src}
		if format == "directory" {
			args = append(args, "-j", j)
		}
		return benchkit.Cmd(args...)
	}
	psql := []string{s.pg.bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1"}
	switch {
	case format == "plain" && method == "none":
		v.restore = func(path, dst string) []benchkit.Command {
			return []benchkit.Command{benchkit.Cmd(append(psql, "-f", path, "-d", dst)...)}
		}
	case format == "plain":
		tool := s.decompress[method]
		if tool == "" {
			v.skip = fmt.Sprintf("skipped: no %s command to decompress the plain dump for psql", method)
			return v
		}
		v.restore = func(path, dst string) []benchkit.Command {
			return []benchkit.Command{benchkit.Cmd(tool, "-dc", path), benchkit.Cmd(append(psql, "-d", dst)...)}
		}
	case format == "tar":
		v.restore = func(path, dst string) []benchkit.Command {
			return []benchkit.Command{benchkit.Cmd(s.pg.bin("pg_restore"), "-d", dst, path)}
		}
	default:
		v.restore = func(path, dst string) []benchkit.Command {
			return []benchkit.Command{benchkit.Cmd(s.pg.bin("pg_restore"), "-j", j, "-d", dst, path)}
		}
	}
	return v
}

// s3Variant is pgsprint's default codec dumped to and restored from
// s3:// on a local versitygw (multipart upload; ranged GETs with
// read-ahead), beside the same codec's file row.
func (s setup) s3Variant(j string) variant {
	v := variant{row: results.Row{Tool: "pgsprint", Format: "pgsprint s3", Compression: "zstd", Level: 1}, ext: ".pgs"}
	if s.s3 == nil {
		v.skip = s.s3Skip
		if v.skip == "" {
			v.skip = "skipped: no S3 server"
		}
		return v
	}
	env := append(s.pgsprintEnv(), s.s3.Env()...)
	v.backup = func(src, path string) benchkit.Command {
		loc, _ := s.s3.Location(path)
		return benchkit.Command{Args: []string{s.pgsprint, "dump", "-q", "-j", j, "-Z", "zstd:1", "--overwrite", "-f", loc, "-d", src}, Env: env}
	}
	v.restore = func(path, dst string) []benchkit.Command {
		loc, _ := s.s3.Location(path)
		return []benchkit.Command{{Args: []string{s.pgsprint, "restore", "-q", "--no-analyze", "-j", j, "-f", loc, "-d", dst}, Env: env}}
	}
	v.stored = func(path string) string {
		_, onDisk := s.s3.Location(path)
		return onDisk
	}
	return v
}
