package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// leakCase is one masked run of the leak test: a dump (then restored and
// written as SQL) or a clone, with flags of docs/guide/pg-dump-flags.md's table.
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

// leakCases are the flag combinations that apply with --mask. The first
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
		{name: "clone", clone: true},
		{name: "clone --split-by key", clone: true, args: []string{"--chunk-size", small, "--split-by", "key"}},
		{name: "clone --text-copy", clone: true, args: []string{"--text-copy", "--chunk-size", small}},
		{name: "clone --statistics-only", clone: true, args: []string{"--statistics-only"}, major: 18, refused: "--mask does not take --statistics-only"},
		{name: "clone --no-data", clone: true, args: []string{"--no-data"}, refused: "--mask masks rows"},
		{name: "clone --subset", clone: true, args: []string{"--subset", "leak.ref: id <= 500", "--chunk-size", small, "--split-by", "key"}},
		{name: "clone --data-only", clone: true, args: []string{"-a"}, precreate: true},
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
// pg_stats. The canaries and the order of the runs come from a seed the
// log prints (PGSPRINT_LEAK_SEED replays it).
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
		can := newCanaries(rng.Uint64())
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
			if err := c.ExecPsql(ctx, "src", can.sql()); err != nil {
				t.Fatal(err)
			}
			l := &leakRun{c: c, bin: bin, can: can, src: c.ConnString("src")}
			if got := scalar(t, l.src, "SELECT count(*) FROM pg_stats WHERE schemaname = 'leak' AND histogram_bounds::text LIKE '%"+can.mark+"%'"); got == "0" {
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
	can      *canaries
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
	if err := os.WriteFile(mask[1], []byte(leakRules), 0o600); err != nil {
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
		for _, f := range l.can.find(data) {
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
	} else if lc.clone {
		args := append([]string{"clone", "-v", "-j", "2", "--source", l.src, "--target", target}, lc.args...)
		mustRun("clone", pgsprint(t, env, append(args, mask...)...))
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
		scan("target "+what, []byte(scalar(t, target, sql)))
	}
	out, err := exec.Command(filepath.Join(l.bin, "pg_dump"), "-d", target).Output()
	if err != nil {
		t.Fatalf("pg_dump of the target: %v", err)
	}
	scan("target pg_dump", out)
}

// leakRules mask every canary column of canaries.sql: text, an integer
// key and the foreign key on it, a uuid key, a jsonb, and a column of a
// partitioned table (its partitions' rows).
const leakRules = `leak.acct.id = hash
leak.acct.email = email
leak.acct.note = const:{"masked": true}
leak.ref.acct_id = hash
leak.dev.id = hash
leak.ev.email = text
`

// canaries are the planted values of one run, drawn from a seed: every
// text canary holds mark, every integer key is intHigh<<24 plus a small
// number (so its binary forms share five bytes), every uuid key starts
// with uuidPrefix.
type canaries struct {
	mark       string
	intHigh    uint64
	uuidPrefix [6]byte
	ints       map[uint64]bool
	rows       int
}

// newCanaries draws the canaries of one run from seed.
func newCanaries(seed uint64) *canaries {
	rng := rand.New(rand.NewPCG(seed, 1))
	c := &canaries{intHigh: 1<<36 + rng.Uint64N(1<<37), ints: map[uint64]bool{}, rows: 3000}
	var b strings.Builder
	b.WriteString("Cnry")
	for range 10 {
		b.WriteByte(byte('a' + rng.IntN(26)))
	}
	c.mark = b.String()
	for i := range c.uuidPrefix {
		c.uuidPrefix[i] = byte(rng.Uint32())
	}
	c.uuidPrefix[0] |= 0x80 // no leading zero byte to blur the prefix
	for i := range c.rows {
		c.ints[c.id(i)] = true
	}
	return c
}

// id is the integer key of row i.
func (c *canaries) id(i int) uint64 { return c.intHigh<<24 | uint64(i)<<8 | 0x5a }

// sql creates schema leak with the canaries and analyzes it, so that the
// source's statistics hold them.
func (c *canaries) sql() string {
	var ids strings.Builder
	for i := range c.rows {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString(strconv.FormatUint(c.id(i), 10))
	}
	u := fmt.Sprintf("%x", c.uuidPrefix[:])
	return fmt.Sprintf(`
CREATE SCHEMA leak;
CREATE TABLE leak.acct (id int8 PRIMARY KEY, email text NOT NULL UNIQUE, note jsonb, pad text);
CREATE TABLE leak.ref (id int4 PRIMARY KEY, acct_id int8 REFERENCES leak.acct (id), pad text);
CREATE TABLE leak.dev (id uuid PRIMARY KEY, label text);
CREATE TABLE leak.ev (id int, at date, email text) PARTITION BY RANGE (at);
CREATE TABLE leak.ev_1 PARTITION OF leak.ev FOR VALUES FROM ('2020-01-01') TO ('2025-01-01');
CREATE TABLE leak.ev_2 PARTITION OF leak.ev FOR VALUES FROM ('2025-01-01') TO ('2030-01-01');
INSERT INTO leak.acct SELECT id, '%[1]s' || n || '@canary.test', jsonb_build_object('secret', '%[1]s-' || n), repeat('p', 60)
	FROM unnest('{%[2]s}'::int8[]) WITH ORDINALITY AS u(id, n);
INSERT INTO leak.ref SELECT n, id, repeat('r', 40) FROM unnest('{%[2]s}'::int8[]) WITH ORDINALITY AS u(id, n);
INSERT INTO leak.dev SELECT (substr('%[3]s', 1, 8) || '-' || substr('%[3]s', 9, 4) || '-4' || lpad(to_hex(g %% 4096), 3, '0') || '-8' || substr(md5(g::text), 1, 3) || '-' || substr(md5(g::text), 4, 12))::uuid, 'x'
	FROM generate_series(1, %[4]d) g;
INSERT INTO leak.ev SELECT g, date '2021-01-01' + g, '%[1]sev' || g FROM generate_series(1, %[4]d) g;
ANALYZE;
`, c.mark, ids.String(), u, c.rows)
}

// find describes every canary in data, in any of the encodings it looks
// for; nil when there is none.
func (c *canaries) find(data []byte) []string {
	var found []string
	s := string(data)
	lower := strings.ToLower(s)
	for _, p := range c.patterns() {
		hay := s
		if p.fold {
			hay = lower
		}
		if i := strings.Index(hay, p.s); i >= 0 {
			found = append(found, fmt.Sprintf("canary (%s) at byte %d: %q", p.what, i, excerpt(s, i)))
		}
	}
	// Integer keys in decimal: every run of digits that is one.
	for i := 0; i < len(s); {
		if s[i] < '0' || s[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if v, err := strconv.ParseUint(s[i:j], 10, 64); err == nil && c.ints[v] {
			found = append(found, fmt.Sprintf("canary integer key %d at byte %d: %q", v, i, excerpt(s, i)))
			if len(found) >= 3 {
				return found
			}
		}
		i = j
	}
	return found
}

// pattern is one encoding of a canary's shared part.
type pattern struct {
	what, s string
	fold    bool // matched case-insensitively (hex)
}

// patterns are the shared parts of the canaries in each encoding: the
// text mark plain, in hex and in base64 (at each of the three byte
// alignments); the integer keys' five high bytes big- and little-endian,
// and in hex; the uuid prefix as text, hex and bytes.
func (c *canaries) patterns() []pattern {
	ps := []pattern{
		{"text", c.mark, false},
		{"text as hex", fmt.Sprintf("%x", c.mark), true},
	}
	for a := range 3 {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", a) + c.mark))
		start, end := (8*a+5)/6, 8*(a+len(c.mark))/6
		ps = append(ps, pattern{fmt.Sprintf("text as base64, offset %d", a), enc[start:end], false})
	}
	var be [8]byte
	for i := range be {
		be[i] = byte(c.intHigh << 24 >> (56 - 8*i))
	}
	le := slices.Clone(be[:])
	slices.Reverse(le)
	ps = append(ps,
		pattern{"integer key, big-endian", string(be[:5]), false},
		pattern{"integer key, little-endian", string(le[3:]), false},
		pattern{"integer key as hex", fmt.Sprintf("%x", be[:5]), true},
		pattern{"uuid key", fmt.Sprintf("%x-%x", c.uuidPrefix[:4], c.uuidPrefix[4:]), true},
		pattern{"uuid key as hex", fmt.Sprintf("%x", c.uuidPrefix[:]), true},
		pattern{"uuid key, binary", string(c.uuidPrefix[:]), false},
	)
	return ps
}

// excerpt is up to 40 bytes of s either side of i.
func excerpt(s string, i int) string {
	return s[max(0, i-40):min(len(s), i+40)]
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
