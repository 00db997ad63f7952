package dump

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/bench/dataset"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// sizeCase is a database whose archive size is compared with pg_dump -Fc's.
type sizeCase struct {
	name  string
	build func(ctx context.Context, c *pgtest.Instance, db string) error
	// most is the largest ratio of the archive's size to pg_dump -Fc's
	// allowed; 0 only reports the sizes.
	most float64
}

// tinyLargeObjects makes n large objects of 100 bytes each.
func tinyLargeObjects(n int) func(ctx context.Context, c *pgtest.Instance, db string) error {
	return func(ctx context.Context, c *pgtest.Instance, db string) error {
		return c.Exec(ctx, db, fmt.Sprintf(`SELECT lo_from_bytea(0, convert_to(repeat(md5(g::text), 3) || lpad(g::text, 4, '0'), 'UTF8')) FROM generate_series(1, %d) g`, n))
	}
}

// smallTables makes n tables of pgtest.SmallTableRows rows.
func smallTables(n int) func(ctx context.Context, c *pgtest.Instance, db string) error {
	return func(ctx context.Context, c *pgtest.Instance, db string) error {
		return dataset.Small(ctx, c.ConnString(db), n)
	}
}

// checkSizes dumps each case with pgsprint (zstd level 1, the default
// before zstd auto, kept fixed so that the sizes compare across runs)
// and pg_dump -Fc and compares the archives' sizes.
func checkSizes(t *testing.T, cases []sizeCase) {
	c := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, tc := range cases {
		db := "size_" + tc.name
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
		if err := tc.build(ctx, c, db); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cfg, err := pgx.ParseConfig(c.ConnString(db))
		if err != nil {
			t.Fatal(err)
		}
		zstd, err := codec.New("zstd", 1)
		if err != nil {
			t.Fatal(err)
		}
		ours := filepath.Join(dir, db+".pgs")
		if _, err := Run(ctx, Options{Source: cfg, File: ours, Jobs: 2, Codec: zstd, Version: "test"}); err != nil {
			t.Fatalf("%s: dump: %v", tc.name, err)
		}
		theirs := filepath.Join(dir, db+".dump")
		if out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir(), "pg_dump"), "-Fc", "-f", theirs, "-d", c.ConnString(db)).CombinedOutput(); err != nil {
			t.Fatalf("%s: pg_dump: %v: %s", tc.name, err, out)
		}
		a, b := fileSize(t, ours), fileSize(t, theirs)
		ratio := float64(a) / float64(b)
		t.Logf("%s: pgsprint %d bytes, pg_dump -Fc %d bytes (PostgreSQL %d): %.2fx", tc.name, a, b, c.Version(), ratio)
		if tc.most > 0 && ratio > tc.most {
			t.Errorf("%s: archive of %d bytes is %.2fx pg_dump -Fc's %d bytes, more than %.2fx", tc.name, a, ratio, b, tc.most)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// mixed is a database of every shape: bench's mixed dataset at a small
// scale, small tables, and large objects from empty to 200 KiB.
func mixed(ctx context.Context, c *pgtest.Instance, db string) error {
	if err := dataset.Mixed(ctx, c.ConnString(db), 0.05); err != nil {
		return err
	}
	if err := smallTables(300)(ctx, c, db); err != nil {
		return err
	}
	return c.Exec(ctx, db, `SELECT lo_from_bytea(0, convert_to(repeat(md5(g::text), (g * g) % 6400), 'UTF8')) FROM generate_series(1, 1000) g`)
}

// TestArchiveSize checks, at a tenth of the long test's sizes, that tiny
// large objects and small tables make an archive no larger than pg_dump
// -Fc's.
func TestArchiveSize(t *testing.T) {
	t.Parallel()
	checkSizes(t, []sizeCase{
		{name: "los", build: tinyLargeObjects(2000), most: 1.0},
		{name: "tables", build: smallTables(100), most: 1.0},
	})
}
