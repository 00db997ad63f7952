package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// newNotOurs starts a cluster with pgtest.NotOursSQL in database src and dumps it
// in 64 KiB blocks to DIR/good.pgs.
func newNotOurs(t *testing.T) (c *pgtest.Instance, src, file string) {
	t.Helper()
	c, src = pgtest.NewNotOurs(t)
	file = filepath.Join(t.TempDir(), "good.pgs")
	mustPgsprint(t, "dump", "-d", src, "-f", file, "--block-size", "65536", "-q")
	return c, src, file
}

// TestToSQLAllOrNothing pipes restore --to-sql of damaged archives into a
// real psql: pgsprint exits 1 and the target is left holding nothing at
// all, not even the tables created before the damage was met, and no row.
// The script cut inside a COPY block (pgsprint killed) and inside pre-data
// commits nothing either. The undamaged archive still loads exactly.
func TestToSQLAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, src, good := newNotOurs(t)
	archive, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(good)
	damaged := func(name string, data []byte) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flip := func(at int) []byte {
		d := append([]byte(nil), archive...)
		d[at] ^= 0x01
		return d
	}
	psql := filepath.Join(c.BinDir(), "psql")
	for i, tc := range []struct {
		name string
		file string
		psql []string // extra psql flags
		// errSub is in pgsprint's error; empty: it must succeed.
		errSub string
		// raised: the script reached the rows and ended in the statement
		// that fails instead of COMMIT.
		raised bool
	}{
		{"undamaged", good, nil, "", false},
		{"byte flipped in a data frame", damaged("half.pgs", flip(len(archive)/2)), nil, "corrupted archive", true},
		{"byte flipped in an early data frame", damaged("third.pgs", flip(len(archive)/3)), nil, "corrupted archive", true},
		{"byte flipped, psql --single-transaction", damaged("half.pgs", flip(len(archive)/2)), []string{"--single-transaction"}, "corrupted archive", true},
		{"truncated", damaged("cut.pgs", archive[:len(archive)*2/3]), nil, "incomplete", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := "sq" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			res := runPipeline(t, []string{"pgsprint", "restore", "-f", tc.file, "--to-sql"},
				append([]string{psql, "-X", "-q", "-d", c.ConnString(db)}, tc.psql...))
			t.Logf("psql exit %d: %s", res[1].code, strings.TrimSpace(res[1].stderr))
			if tc.errSub == "" {
				if res[0].code != 0 || res[1].code != 0 {
					t.Fatalf("pgsprint exit %d, psql exit %d:\n%s\n%s", res[0].code, res[1].code, res[0].stderr, res[1].stderr)
				}
				pgtest.RequireSameSchema(t, c.BinDir(), src, c.ConnString(db))
				pgtest.RequireSameData(t, src, c.ConnString(db))
				return
			}
			checkOneError(t, res[0].code, exitFailure, res[0].stderr, tc.errSub)
			if got := strings.Contains(res[1].stderr, "pgsprint could not read the archive to its end"); got != tc.raised {
				t.Errorf("psql met the script's failing end: %v, want %v; psql said:\n%s", got, tc.raised, res[1].stderr)
			}
			if tc.raised && res[1].code == 0 {
				t.Error("psql exited 0 on a script that ends in an error")
			}
			if objs := pgtest.UserObjects(t, c.ConnString(db)); len(objs) > 0 {
				t.Errorf("the target holds %v after a failed --to-sql", objs)
			}
		})
	}

	// pgsprint killed: the script just ends, wherever it was.
	script := mustPgsprint(t, "restore", "-f", good, "--to-sql").stdout
	copyAt := strings.Index(script, `COPY "public"."t1"`)
	createAt := strings.Index(script, "CREATE TABLE app.x")
	if copyAt < 0 || createAt < 0 || !strings.HasSuffix(script, "COMMIT;\n") || !strings.Contains(script, "\nBEGIN;\n") {
		t.Fatalf("script without the expected statements:\n%.2000s", script)
	}
	for i, cut := range []struct {
		name string
		at   int
	}{
		{"script cut inside a row of a COPY block", copyAt + 500000 + 7},
		{"script cut inside pre-data", createAt + 10},
	} {
		t.Run(cut.name, func(t *testing.T) {
			db := "cut" + string(rune('a'+i))
			if err := c.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			part := script[:cut.at]
			if strings.HasSuffix(part, "\n") {
				t.Fatal("the cut falls on a line end: it proves less")
			}
			in := damaged(db+".sql", []byte(part))
			res := runPipeline(t, []string{"cat", in}, []string{psql, "-X", "-q", "-d", c.ConnString(db)})
			t.Logf("psql exit %d: %s", res[1].code, strings.TrimSpace(res[1].stderr))
			if objs := pgtest.UserObjects(t, c.ConnString(db)); len(objs) > 0 {
				t.Errorf("the target holds %v after a cut script", objs)
			}
		})
	}
}
