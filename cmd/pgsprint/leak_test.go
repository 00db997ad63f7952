package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// leakCase is one masked run of the leak test: a dump (then restored and
// written as SQL), or a dump or clone refused, with flags of
// docs/guide/pg-dump-flags.md's table. The clones that run are
// TestMaskLeakClone's (internal/clone).
type leakCase struct {
	name  string
	clone bool
	args  []string
	// major is the oldest server the flags apply to (--statistics-only:
	// 18); 0 for any.
	major int
	// precreate: the target needs the tables first (no schema in the run).
	precreate bool
	// pipe dumps to standard output into a restore from standard input.
	pipe bool
	// refused is the usage error (exit 2) the run must end with: flags
	// that would carry original values, or cannot mask.
	refused string
}

// leakCases are the flag combinations that apply with --mask, but the
// clones that run (TestMaskLeakClone in internal/clone). The first
// two are the reproductions of issue 42 (statistics, chunk bounds of a
// masked key): `make test` runs those on one major, `make test-long` all
// of them, in a seeded order, on PostgreSQL 15 and 18.
func leakCases() []leakCase {
	const small = "64kB"
	return []leakCase{
		{name: "dump --statistics-only", args: []string{"--statistics-only"}, major: 18, refused: "--mask does not take --statistics-only"},
		{name: "dump --split-by key", args: []string{"--chunk-size", small, "--split-by", "key"}},
		{name: "dump --split-by auto", args: []string{"--chunk-size", small}},
		{name: "dump -Z none", args: []string{"-Z", "none"}},
		{name: "dump -Z lz4", args: []string{"-Z", "lz4"}},
		{name: "dump -Z gzip", args: []string{"-Z", "gzip:1", "--chunk-size", small}},
		{name: "dump --schema-only", args: []string{"-s"}, refused: "--mask masks rows"},
		{name: "dump --data-only", args: []string{"-a", "--chunk-size", small, "--split-by", "key"}, precreate: true},
		{name: "dump --no-data", args: []string{"--no-data"}, refused: "--mask masks rows"},
		{name: "dump --no-schema", args: []string{"--no-schema", "--chunk-size", small, "--split-by", "key"}, precreate: true},
		{name: "dump --statistics", args: []string{"--statistics"}, refused: "--mask does not take --statistics"},
		{name: "dump --subset", args: []string{"--subset", "leak.ref: id <= 500", "--chunk-size", small, "--split-by", "key"}},
		{name: "dump --exclude-table-data", args: []string{"--exclude-table-data", "leak.dev"}},
		{name: "dump -n -T", args: []string{"-n", "leak", "-T", "leak.dev", "--chunk-size", small, "--split-by", "key"}},
		{name: "dump pipe", args: []string{"--chunk-size", small, "--split-by", "key"}, pipe: true},
		{name: "clone --statistics-only", clone: true, args: []string{"--statistics-only"}, major: 18, refused: "--mask does not take --statistics-only"},
		{name: "clone --no-data", clone: true, args: []string{"--no-data"}, refused: "--mask masks rows"},
	}
}

// TestMaskLeak plants canaries (a text mark, integer keys whose high
// bytes are one constant, uuid keys with one prefix) in masked columns of
// every kind: text, an integer key, a uuid key, a jsonb, a column of a
// partition, a column in a foreign key; then makes masked copies and
// scans everything pgsprint wrote or left for any canary in any encoding
// (text, hex, base64, an integer's decimal and binary forms): every
// decompressed stream of the archive, its manifest, its schema archive as
// pg_restore prints it, list and list --json, stderr with -v, --to-sql,
// the temporary and spill directories, and the target's rows, schema and
// pg_stats. The canaries (pgtest.Canaries) and the order of the runs
// come from a seed the log prints (PGSPRINT_LEAK_SEED replays it).
// TestMaskLeakClone (internal/clone) scans the masked clones alike.
func TestMaskLeak(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PGSPRINT_LEAK_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PGSPRINT_LEAK_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	cases := leakCases()
	majors := []int{18}
	if long {
		majors = []int{15, 18}
		rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	} else {
		cases = cases[:2]
	}
	for _, major := range majors {
		can := pgtest.NewCanaries(rng.Uint64())
		t.Run(fmt.Sprintf("PostgreSQL %d", major), func(t *testing.T) {
			t.Parallel()
			bin, err := pgtest.BinDirFor(major)
			if err != nil {
				t.Skipf("PostgreSQL %d: %v", major, err)
			}
			ctx := context.Background()
			c := pgtest.New(t, pgtest.Options{BinDir: bin, Settings: map[string]string{"autovacuum": "off"}})
			if err := c.CreateDB(ctx, "src"); err != nil {
				t.Fatal(err)
			}
			if err := c.ExecPsql(ctx, "src", can.SQL()); err != nil {
				t.Fatal(err)
			}
			l := &leakRun{c: c, bin: bin, can: can, src: c.ConnString("src")}
			if got := pgtest.Scalar(t, l.src, "SELECT count(*) FROM pg_stats WHERE schemaname = 'leak' AND histogram_bounds::text LIKE '%"+can.Mark()+"%'"); got == "0" {
				t.Fatal("the source's statistics hold no canary: the test could not see a statistics leak")
			}
			for i, lc := range cases {
				if lc.major > major {
					continue
				}
				t.Run(lc.name, func(t *testing.T) { l.run(t, i, lc) })
			}
		})
	}
}

// leakRun is one server of the leak test, its source database and
// canaries.
type leakRun struct {
	c        *pgtest.Instance
	bin, src string
	can      *pgtest.Canaries
}

// run makes one masked copy and scans what it left.
func (l *leakRun) run(t *testing.T, i int, lc leakCase) {
	ctx := context.Background()
	dir := t.TempDir()
	tmp, spill := filepath.Join(dir, "tmp"), filepath.Join(dir, "spill")
	for _, d := range []string{tmp, spill} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"TMPDIR=" + tmp}
	mask := []string{"--mask-file", filepath.Join(dir, "rules"), "--mask-secret-file", filepath.Join(dir, "secret")}
	if err := os.WriteFile(mask[1], []byte(pgtest.LeakRules), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mask[3], []byte("leak test secret, not a real one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := fmt.Sprintf("dst%d", i)
	if err := l.c.CreateDB(ctx, dst); err != nil {
		t.Fatal(err)
	}
	target := l.c.ConnString(dst)
	if lc.precreate {
		l.precreate(t, dst)
	}
	scan := func(where string, data []byte) {
		t.Helper()
		for _, f := range l.can.Find(data) {
			t.Errorf("%s: %s", where, f)
		}
	}
	mustRun := func(what string, r result) {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", what, r.code, r.stderr)
		}
		scan(what+": stdout", []byte(r.stdout))
		scan(what+": stderr", []byte(r.stderr))
	}
	if lc.refused != "" {
		cmd := "dump"
		args := []string{"-f", filepath.Join(dir, "dev.pgs"), "-d", l.src}
		if lc.clone {
			cmd, args = "clone", []string{"--source", l.src, "--target", target}
		}
		r := pgsprint(t, env, append(append(append([]string{cmd}, args...), lc.args...), mask...)...)
		checkOneError(t, r.code, exitUsage, r.stderr, lc.refused)
		scan(cmd+": stderr", []byte(r.stderr))
	} else {
		file := filepath.Join(dir, "dev.pgs")
		args := append([]string{"dump", "-v", "-j", "2", "-d", l.src}, lc.args...)
		if lc.pipe {
			cmds := [][]string{
				append(append([]string{"pgsprint"}, append(args, "-f", "-")...), mask...),
				{"pgsprint", "restore", "-v", "-j", "2", "-f", "-", "--spill-dir", spill, "-d", target},
			}
			for k, r := range runPipeline(t, cmds...) {
				mustRun(strings.Join(cmds[k][:2], " "), r)
			}
			// The same dump into a file too, to scan what the pipe carried.
		}
		mustRun("dump", pgsprint(t, env, append(append(args, "-f", file), mask...)...))
		l.scanArchive(t, file, scan)
		mustRun("list", pgsprint(t, env, "list", file))
		mustRun("list --json", pgsprint(t, env, "list", "--json", file))
		mustRun("verify", pgsprint(t, env, "verify", file))
		mustRun("restore --to-sql", pgsprint(t, env, "restore", "--to-sql", "-f", file))
		if !lc.pipe {
			mustRun("restore", pgsprint(t, env, "restore", "-v", "-j", "2", "-f", file, "-d", target))
		}
	}
	l.scanTarget(t, target, scan)
	for _, d := range []string{tmp, spill} {
		filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if b, err := os.ReadFile(path); err == nil {
					scan("file "+path, b)
				}
			}
			return nil
		})
	}
}

// precreate makes the source's tables in the target (pg_dump -s, which
// carries no row), for runs that bring no schema.
func (l *leakRun) precreate(t *testing.T, db string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(l.bin, "pg_dump"), "-s", "-d", l.src).Output()
	if err != nil {
		t.Fatalf("pg_dump -s: %v", err)
	}
	if err := l.c.ExecPsql(context.Background(), db, string(out)); err != nil {
		t.Fatal(err)
	}
}

// scanArchive scans every decompressed stream of the archive at file, its
// manifest and its schema archive as pg_restore prints it.
func (l *leakRun) scanArchive(t *testing.T, file string, scan func(string, []byte)) {
	t.Helper()
	f, err := openArchive(context.Background(), file, location.Options{}, archive.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := json.Marshal(f.Manifest())
	if err != nil {
		t.Fatal(err)
	}
	scan("manifest", m)
	ar, ok := f.Source.(*archive.Reader)
	if !ok {
		t.Fatalf("the archive opened as %T, not a seekable reader", f.Source)
	}
	for _, s := range ar.Streams() {
		r := ar.OpenStream(s.ID)
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("read stream %d: %v", s.ID, err)
		}
		scan(fmt.Sprintf("stream %d", s.ID), b)
	}
	schema := extractSchema(t, file)
	out, err := exec.Command(filepath.Join(l.bin, "pg_restore"), "-f", "-", schema).Output()
	if err != nil {
		t.Fatalf("pg_restore -f - of the schema archive: %v", err)
	}
	scan("schema archive (pg_restore -f -)", out)
}

// scanTarget scans the target's statistics and comments, and its rows
// and schema as pg_dump writes them.
func (l *leakRun) scanTarget(t *testing.T, target string, scan func(string, []byte)) {
	t.Helper()
	for what, sql := range map[string]string{
		"pg_stats":       "SELECT coalesce(string_agg(s::text, E'\\n'), '') FROM pg_catalog.pg_stats s",
		"pg_description": "SELECT coalesce(string_agg(description, E'\\n'), '') FROM pg_catalog.pg_description",
	} {
		scan("target "+what, []byte(pgtest.Scalar(t, target, sql)))
	}
	out, err := exec.Command(filepath.Join(l.bin, "pg_dump"), "-d", target).Output()
	if err != nil {
		t.Fatalf("pg_dump of the target: %v", err)
	}
	scan("target pg_dump", out)
}

// TestListMaskedWithStatistics: an archive with masked columns whose
// optimizer statistics came along (statistics without data, as a masked
// --statistics-only dump of 9d1590f wrote) is not called a masked copy.
func TestListMaskedWithStatistics(t *testing.T) {
	mk := &archive.Mask{Columns: []archive.MaskColumn{{Schema: "s", Table: "t", Column: "c", Rule: "email"}}}
	for _, tc := range []struct {
		stats bool
		want  string
	}{
		{false, "masked development copy: 1 columns"},
		{true, "NOT a masked development copy: its optimizer statistics hold original values"},
	} {
		got := maskedLine(&archive.Manifest{Mask: mk, StatisticsWithoutData: tc.stats})
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("statistics %v: %q, want %q...", tc.stats, got, tc.want)
		}
	}
}
