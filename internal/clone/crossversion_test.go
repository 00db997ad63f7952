package clone

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// envMatrix set to "full" makes TestCrossVersion run every pair of installed
// versions (older or equal source, newer or equal target) instead of every
// version into the newest, and TestDumpFromStandby run on every version.
const envMatrix = "PGSPRINT_TEST_PG_MATRIX"

// versionPair is one cross-version round trip: dump from src, restore into
// dst, and clone from src into dst.
type versionPair struct{ src, dst int }

// matrix lists the round trips to run over the installed versions: the
// oldest into the newest under `make test` (the widest upgrade users take;
// every test beside this one runs the same version on both sides), each
// version into the newest under `make test-long`, or with full every pair
// whose target is at least as new as its source.
func matrix(versions []int, full bool) []versionPair {
	var pairs []versionPair
	newest := versions[len(versions)-1]
	if !full && !long {
		return []versionPair{{versions[0], newest}}
	}
	for i, s := range versions {
		if !full {
			pairs = append(pairs, versionPair{s, newest})
			continue
		}
		for _, d := range versions[i:] {
			pairs = append(pairs, versionPair{s, d})
		}
	}
	return pairs
}

// TestCrossVersion dumps the torture database from one major version
// (dump.Run) and restores it into another (restore.Run), then clones it
// across (Run): the archive must load into a newer server, with pg_dump
// picked for the source and pg_restore for the target by themselves. Both sides are compared with the newest pg_dump installed, which
// prints what legitimately differs between versions the same way on both.
func TestCrossVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	versions := pgtest.VersionsOrSkip(t, 2)
	full := os.Getenv(envMatrix) == "full"
	pairs := matrix(versions, full)
	newestBin, err := pgtest.BinDirFor(versions[len(versions)-1])
	if err != nil {
		t.Fatal(err)
	}

	// One cluster per version, serving as source (database "src") and as
	// target (a database per source version).
	clusters := map[int]*pgtest.Instance{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, v := range versions {
		isSource, isTarget := false, false
		for _, p := range pairs {
			isSource, isTarget = isSource || p.src == v, isTarget || p.dst == v
		}
		if !isSource && !isTarget {
			continue
		}
		dir, err := pgtest.BinDirFor(v)
		if err != nil {
			t.Fatal(err)
		}
		c := pgtest.New(t, pgtest.Options{BinDir: dir})
		clusters[v] = c
		if !isSource {
			continue
		}
		if err := c.CreateDB(ctx, "src"); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.ExecPsql(ctx, "src", pgtest.TortureSQL()); err != nil {
				mu.Lock()
				defer mu.Unlock()
				t.Errorf("loading torture into PostgreSQL %d: %v", v, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	dir := t.TempDir()

	for _, p := range pairs {
		t.Run(fmt.Sprintf("%d_to_%d", p.src, p.dst), func(t *testing.T) {
			src, dst := clusters[p.src], clusters[p.dst]
			if missing := missingExtensions(t, src, dst); len(missing) > 0 {
				// Some builds (the PyPI wheels of 13 and 16) carry no
				// contrib modules: a limit of the target, not of pgsprint.
				t.Skipf("PostgreSQL %d here lacks extensions the source uses: %v", p.dst, missing)
			}
			file := filepath.Join(dir, fmt.Sprintf("%d-%d.pgs", p.src, p.dst))
			dumpFile(t, src.ConnString("src"), file)
			if src != dst {
				// Roles are cluster-wide: bring the owners and grantees
				// over first, as pg_dumpall --globals-only would.
				if err := src.CopyRoles(ctx, dst); err != nil {
					t.Fatal(err)
				}
			}
			db := fmt.Sprintf("from %d", p.src)
			if err := dst.CreateDB(ctx, db); err != nil {
				t.Fatal(err)
			}
			restoreFile(t, file, dst.ConnString(db))
			pgtest.RequireSameSchemaAcrossVersions(t, newestBin, src.ConnString("src"), dst.ConnString(db))
			pgtest.RequireSameData(t, src.ConnString("src"), dst.ConnString(db))

			// The same upgrade without a file: clone straight across.
			cloned := fmt.Sprintf("cloned from %d", p.src)
			if err := dst.CreateDB(ctx, cloned); err != nil {
				t.Fatal(err)
			}
			cloneDB(t, src.ConnString("src"), dst.ConnString(cloned))
			pgtest.RequireSameSchemaAcrossVersions(t, newestBin, src.ConnString("src"), dst.ConnString(cloned))
			pgtest.RequireSameData(t, src.ConnString("src"), dst.ConnString(cloned))
		})
	}
}

// TestDumpFromStandby dumps (dump.Run) from a streaming hot standby while transfers
// run on the primary: the snapshot is exported on the standby, the locks
// are taken there, and the restored copy must hold the primary's torture
// data exactly and a bank whose accounts agree with its ledger (one instant).
func TestDumpFromStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	versions := pgtest.VersionsOrSkip(t, 1)
	if os.Getenv(envMatrix) != "full" {
		versions = versions[len(versions)-1:]
	}
	for _, v := range versions {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			bin, err := pgtest.BinDirFor(v)
			if err != nil {
				t.Fatal(err)
			}
			primary := pgtest.New(t, pgtest.Options{BinDir: bin})
			if err := primary.CreateDB(ctx, "src"); err != nil {
				t.Fatal(err)
			}
			pgtest.LoadTorture(t, primary, "src")
			err = primary.Exec(ctx, "src", pgtest.BankSQL)
			if err != nil {
				t.Fatal(err)
			}
			standby := pgtest.NewStandby(t, primary)
			if err := primary.WaitReplayed(ctx, standby); err != nil {
				t.Fatal(err)
			}
			// The primary's torture tables do not change from here on.
			torture := pgtest.Fingerprint(t, primary.ConnString("src"))

			bank := pgtest.StartTransfers(t, primary.ConnString("src"), 1)
			// Let some transfers reach the standby first, so that the
			// snapshot falls in the middle of the stream.
			for bank.Count() < 50 && !t.Failed() {
				time.Sleep(10 * time.Millisecond)
			}
			if err := primary.WaitReplayed(ctx, standby); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "standby.pgs")
			dumpFile(t, standby.ConnString("src"), file)
			bank.Stop()

			if err := primary.CreateDB(ctx, "copy"); err != nil {
				t.Fatal(err)
			}
			restoreFile(t, file, primary.ConnString("copy"))
			pgtest.RequireSameSchema(t, primary.BinDir(), primary.ConnString("src"), primary.ConnString("copy"))

			// The torture tables did not change: equal to the primary's.
			// The bank did: it must be consistent in itself.
			restored := pgtest.Fingerprint(t, primary.ConnString("copy"))
			// Unlogged tables cannot be read on a standby: like pg_dump,
			// pgsprint keeps their definition and skips their rows.
			if got := restored["app.cache"]; got != "rows=0 hash=0/0" {
				t.Errorf("unlogged app.cache restored from a standby as %q, want it empty", got)
			}
			delete(torture, "app.cache")
			delete(restored, "app.cache")
			var diff []string
			for _, d := range compare.FingerprintDiff(torture, restored) {
				if !strings.Contains(d, "public.") {
					diff = append(diff, d)
				}
			}
			if len(diff) > 0 {
				t.Fatalf("restored torture data differs from the primary's:\n%s", strings.Join(diff, "\n"))
			}
			pgtest.CheckBank(t, primary.ConnString("copy"), "bank restored from a standby")
			t.Logf("PostgreSQL %d standby: %d transfers in all", v, bank.Count())
		})
	}
}

// missingExtensions lists the extensions installed in src's database "src"
// that dst's server does not have available.
func missingExtensions(t *testing.T, src, dst *pgtest.Instance) []string {
	t.Helper()
	ctx := context.Background()
	names := func(c *pgtest.Instance, db, q string) map[string]bool {
		conn, err := pgx.Connect(ctx, c.ConnString(db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		list, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		for _, n := range list {
			set[n] = true
		}
		return set
	}
	used := names(src, "src", "SELECT extname::text FROM pg_catalog.pg_extension")
	avail := names(dst, "postgres", "SELECT name::text FROM pg_catalog.pg_available_extensions")
	var missing []string
	for n := range used {
		if !avail[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	return missing
}
