package clone

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/subset"
)

// leakClone is one masked clone of TestMaskLeakClone: what its flags
// (docs/guide/pg-dump-flags.md's table) change in the options, and
// whether the target needs the tables first (no schema in the run).
type leakClone struct {
	name      string
	edit      func(*Options)
	precreate bool
}

// leakClones are the clones with --mask that are not refused (the
// refusals are usage errors: TestMaskLeak in cmd/pgsprint).
func leakClones() []leakClone {
	const small = 64 << 10
	return []leakClone{
		{name: "clone"},
		{name: "clone --split-by key", edit: func(o *Options) { o.Session.Split = chunk.Options{ChunkSize: small, Method: chunk.Key} }},
		{name: "clone --text-copy", edit: func(o *Options) { o.TextCopy, o.Session.Split.ChunkSize = true, small }},
		{name: "clone --subset", edit: func(o *Options) {
			o.Session.Subset = subset.Spec{Seeds: []subset.Seed{{Table: "leak.ref", Where: "id <= 500"}}}
			o.Session.Split = chunk.Options{ChunkSize: small, Method: chunk.Key}
		}},
		{name: "clone --data-only", edit: func(o *Options) { o.Filter.DataOnly = true }, precreate: true},
	}
}

// TestMaskLeakClone plants pgtest.Canaries (a text mark, integer keys
// whose high bytes are one constant, uuid keys with one prefix) in masked
// columns of every kind, then clones with the masking rules and scans for
// any canary in any encoding everything the clone wrote or left: its log
// at debug level (what -v prints), the temporary directory, and the
// target's rows, schema (pg_dump), pg_stats and comments. `make test`
// clones once on PostgreSQL 18; `make test-long` every case of
// leakClones, in a seeded order, on PostgreSQL 15 and 18. The canaries
// and the order come from a seed the log prints (PGSPRINT_LEAK_SEED
// replays it). Not parallel: TMPDIR is the test's.
func TestMaskLeakClone(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("PGSPRINT_LEAK_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("seed %d (PGSPRINT_LEAK_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	cases := leakClones()
	majors := []int{18}
	if pgtest.Long {
		majors = []int{15, 18}
		rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	} else {
		cases = cases[:1]
	}
	rules, err := mask.ReadFile(writeFile(t, "rules", pgtest.LeakRules))
	if err != nil {
		t.Fatal(err)
	}
	spec := mask.Spec{Rules: rules, Secret: []byte("leak test secret, not a real one")}
	for _, major := range majors {
		can := pgtest.NewCanaries(rng.Uint64())
		t.Run(fmt.Sprintf("PostgreSQL %d", major), func(t *testing.T) {
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
			src := c.ConnString("src")
			if got := pgtest.Scalar(t, src, "SELECT count(*) FROM pg_stats WHERE schemaname = 'leak' AND histogram_bounds::text LIKE '%"+can.Mark()+"%'"); got == "0" {
				t.Fatal("the source's statistics hold no canary: the test could not see a statistics leak")
			}
			for i, lc := range cases {
				t.Run(lc.name, func(t *testing.T) {
					scan := func(where string, data []byte) {
						t.Helper()
						for _, f := range can.Find(data) {
							t.Errorf("%s: %s", where, f)
						}
					}
					tmp := t.TempDir()
					t.Setenv("TMPDIR", tmp)
					dst := fmt.Sprintf("dst%d", i)
					if err := c.CreateDB(ctx, dst); err != nil {
						t.Fatal(err)
					}
					target := c.ConnString(dst)
					if lc.precreate {
						out, err := exec.Command(filepath.Join(bin, "pg_dump"), "-s", "-d", src).Output()
						if err != nil {
							t.Fatalf("pg_dump -s: %v", err)
						}
						if err := c.ExecPsql(ctx, dst, string(out)); err != nil {
							t.Fatal(err)
						}
					}
					var log bytes.Buffer
					opts := cloneOptions(t, src, target, 2, 0)
					opts.Session.Mask = spec
					opts.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
					if lc.edit != nil {
						lc.edit(&opts)
					}
					if _, err := Run(pgtest.Context(t), opts); err != nil {
						t.Fatalf("clone: %v", err)
					}
					scan("the clone's log", log.Bytes())
					for what, sql := range map[string]string{
						"pg_stats":       "SELECT coalesce(string_agg(s::text, E'\\n'), '') FROM pg_catalog.pg_stats s",
						"pg_description": "SELECT coalesce(string_agg(description, E'\\n'), '') FROM pg_catalog.pg_description",
					} {
						scan("target "+what, []byte(pgtest.Scalar(t, target, sql)))
					}
					out, err := exec.Command(filepath.Join(bin, "pg_dump"), "-d", target).Output()
					if err != nil {
						t.Fatalf("pg_dump of the target: %v", err)
					}
					scan("target pg_dump", out)
					filepath.WalkDir(tmp, func(path string, e os.DirEntry, err error) error {
						if err == nil && e.Type().IsRegular() {
							if b, err := os.ReadFile(path); err == nil {
								scan("file "+path, b)
							}
						}
						return nil
					})
				})
			}
		})
	}
}

// writeFile writes text into a file of the test's and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
