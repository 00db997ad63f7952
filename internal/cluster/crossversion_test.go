package cluster

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestDumpAllCrossVersion is the upgrade path: a whole server dumped from
// the oldest installed major and restored into the newest, compared with
// the newest pg_dumpall and pg_dump on both sides.
func TestDumpAllCrossVersion(t *testing.T) {
	t.Parallel()
	versions := pgtest.VersionsOrSkip(t, 2)
	oldest, newest := versions[0], versions[len(versions)-1]
	oldBin, err := pgtest.BinDirFor(oldest)
	if err != nil {
		t.Fatal(err)
	}
	newBin, err := pgtest.BinDirFor(newest)
	if err != nil {
		t.Fatal(err)
	}
	src := pgtest.New(t, pgtest.Options{BinDir: oldBin})
	ts := pgtest.TablespaceDir(t)
	pgtest.LoadServer(t, src, ts)
	wantGlobals := pgtest.GlobalsDump(t, newBin, src.ConnString("postgres"))
	wantSchema, wantData := map[string]string{}, map[string]map[string]string{}
	for _, db := range pgtest.ServerDatabases {
		wantSchema[db] = compare.NormalizeAcrossVersions(pgtest.SchemaDump(t, newBin, src.ConnString(db), "--create"))
		wantData[db] = pgtest.Fingerprint(t, src.ConnString(db))
	}
	file := filepath.Join(t.TempDir(), "server.pgs")
	dumpAll(t, src.ConnString("postgres"), file, 2, "skip*")
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	pgtest.EmptyDir(t, ts)
	dst := pgtest.New(t, pgtest.Options{BinDir: newBin})
	restoreAll(t, file, dst.ConnString("postgres"), 2)
	// PostgreSQL 16 gave each membership its own INHERIT option and
	// grantor, which pg_dumpall prints for 16+ servers only: an older
	// membership inherits as its member role does (INHERIT here).
	norm := func(g string) string {
		g = regexp.MustCompile(`(?m)( WITH INHERIT TRUE|, INHERIT TRUE)?( GRANTED BY \S+)?;$`).ReplaceAllString(pgtest.WithoutRole(g, "postgres"), ";")
		return g
	}
	if got := pgtest.GlobalsDump(t, newBin, dst.ConnString("postgres")); norm(got) != norm(wantGlobals) {
		t.Errorf("globals differ (%d into %d):\n%s", oldest, newest, compare.SchemaDiff(norm(wantGlobals), norm(got)))
	}
	for _, db := range pgtest.ServerDatabases {
		got := compare.NormalizeAcrossVersions(pgtest.SchemaDump(t, newBin, dst.ConnString(db), "--create"))
		if d := compare.SchemaDiff(wantSchema[db], got); d != "" {
			t.Errorf("database %s: schemas differ (%d into %d):\n%s", db, oldest, newest, d)
		}
		if d := compare.FingerprintDiff(wantData[db], pgtest.Fingerprint(t, dst.ConnString(db))); len(d) > 0 {
			t.Errorf("database %s: data differs:\n%s", db, strings.Join(d, "\n"))
		}
	}
}
