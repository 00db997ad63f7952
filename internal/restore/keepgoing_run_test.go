package restore

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// restoreKeepGoing restores file into conn through Run with KeepGoing (as
// `pgsprint restore --keep-going -j 2`, with --resume when resume), and
// returns the result's failures by object and Run's error.
func restoreKeepGoing(t *testing.T, file, conn string, resume bool) (map[string]Failure, error) {
	t.Helper()
	var res *Result
	err := restoreRun(t, file, conn, func(o *Options) { o.Jobs, o.KeepGoing, o.Resume = 2, true, resume }, &res)
	failures := map[string]Failure{}
	if res != nil {
		for _, f := range res.Failures {
			if f.Error == "" {
				t.Errorf("the result names %s without its error", f.Object)
			}
			failures[f.Object] = f
		}
	}
	return failures, err
}

// TestKeepGoing restores, with KeepGoing, an archive dumped from
// PostgreSQL 15 into a PostgreSQL 18 that lacks ICU, lz4, pgcrypto, the
// tablespace and the role: every object pg_restore restores from the same
// schema is restored, every failure is named with the server's error and
// its dependents under it, every restored table holds exactly the
// source's rows, and Run returns an IncompleteError. Then the target gets
// what it lacked that can be given (the role and the tablespace) and
// Resume finishes what those held back; what it still lacks stays named.
// Into a server that has everything, nothing is left out.
// (TestKeepGoingClone in internal/clone clones it; TestKeepGoing in
// cmd/pgsprint checks preflight, the exit codes, the summary and a pipe.)
func TestKeepGoing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := pgtest.KeepGoingPair(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "kg.pgs")
	dumpFile(t, src.ConnString("src"), file, func(o *dump.Options) { o.Jobs = 2 })
	custom := filepath.Join(dir, "kg.dump")
	if out, err := exec.Command(filepath.Join(src.BinDir(), "pg_dump"), "-Fc", "-f", custom, "-d", src.ConnString("src")).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	for _, db := range []string{"by_pg_restore", "kg", "stops"} {
		if err := dst.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	prOut, _ := exec.Command(filepath.Join(dst.BinDir(), "pg_restore"), "-d", dst.ConnString("by_pg_restore"), custom).CombinedOutput()
	t.Logf("pg_restore:\n%s", prOut)

	// The default stops at the first error.
	var incomplete *IncompleteError
	if err := restoreFile(t, file, dst.ConnString("stops"), func(o *Options) { o.Jobs = 2 }); err == nil || errors.As(err, &incomplete) {
		t.Fatalf("restore without KeepGoing: %v, want the first error", err)
	}

	failures, err := restoreKeepGoing(t, file, dst.ConnString("kg"), false)
	t.Logf("restore with KeepGoing: %v", err)
	if !errors.As(err, &incomplete) {
		t.Fatalf("restore with KeepGoing: %v, want an IncompleteError", err)
	}
	var named strings.Builder
	skipping := false
	for _, f := range failures {
		named.WriteString(f.Object + ": " + f.Error + "; " + strings.Join(f.Skipped, ", ") + "\n")
		skipping = skipping || len(f.Skipped) > 0
	}
	for _, want := range []string{
		`EXTENSION pgcrypto`, `COLLATION public.icu_und`, `TABLE app.packed`, `lz4`,
		`TABLE app.sorted`, `TABLE app.hashed`, `kg_space`, `kg_owner`,
	} {
		if !strings.Contains(named.String(), want) {
			t.Errorf("the failures do not name %q:\n%s", want, named.String())
		}
	}
	if !skipping {
		t.Errorf("no failure names what was skipped because of it:\n%s", named.String())
	}

	// At least every relation pg_restore restored, and every restored
	// table exact.
	have := pgtest.Relations(t, dst.ConnString("kg"))
	for _, rel := range pgtest.Relations(t, dst.ConnString("by_pg_restore")) {
		if !slices.Contains(have, rel) {
			t.Errorf("pg_restore restored %s, the restore with KeepGoing did not", rel)
		}
	}
	pgtest.RequireRestoredRows(t, src.ConnString("src"), dst.ConnString("kg"))
	pgtest.RequireValidIndexes(t, dst.ConnString("kg"))

	// What can be installed is installed: the role and the tablespace;
	// Resume finishes what they held back.
	for _, s := range []string{"CREATE ROLE kg_owner", "CREATE TABLESPACE kg_space LOCATION " + pg.Literal(pgtest.TablespaceDir(t))} {
		if err := dst.Exec(ctx, "postgres", s); err != nil {
			t.Fatal(err)
		}
	}
	failures, err = restoreKeepGoing(t, file, dst.ConnString("kg"), true)
	t.Logf("restore with KeepGoing and Resume: %v", err)
	if !errors.As(err, &incomplete) {
		t.Fatalf("restore with KeepGoing and Resume into a target still without ICU: %v, want an IncompleteError", err)
	}
	if got := pgtest.Scalar(t, dst.ConnString("kg"), "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'app.owned'::regclass"); got != "kg_owner" {
		t.Errorf("after Resume app.owned belongs to %s, want kg_owner", got)
	}
	if got := pgtest.Scalar(t, dst.ConnString("kg"), "SELECT coalesce((SELECT spcname FROM pg_tablespace WHERE oid = reltablespace), '') FROM pg_class WHERE oid = 'app.placed'::regclass"); got != "kg_space" {
		t.Errorf("after Resume app.placed is in tablespace %q, want kg_space", got)
	}
	if incomplete.Kept != 0 {
		t.Errorf("Resume left %d objects created without their owner or tablespace, want 0", incomplete.Kept)
	}
	pgtest.RequireRestoredRows(t, src.ConnString("src"), dst.ConnString("kg"))
	pgtest.RequireValidIndexes(t, dst.ConnString("kg"))

	// Everything but what needs pgcrypto, ICU or lz4 (and what depends on
	// it) now equals the source, and exactly those are still named.
	var failed []string
	for obj := range failures {
		failed = append(failed, obj)
	}
	slices.Sort(failed)
	if want := []string{"COLLATION public.icu_und", "EXTENSION pgcrypto", "TABLE app.packed"}; !slices.Equal(failed, want) {
		t.Errorf("Resume still names the failures %v, want %v", failed, want)
	}
	for obj, want := range map[string][]string{
		"EXTENSION pgcrypto":       {"TABLE app.hashed"},
		"COLLATION public.icu_und": {"TABLE app.sorted", "INDEX app.sorted_name", "VIEW app.sorted_names", "FK CONSTRAINT app.child child_sorted_id_fkey"},
	} {
		for _, w := range want {
			if !slices.Contains(failures[obj].Skipped, w) {
				t.Errorf("Resume does not name %s as skipped because of %s (it names %v)", w, obj, failures[obj].Skipped)
			}
		}
	}
	pgtest.RequireEqualBut(t, dst.BinDir(), src.ConnString("src"), dst.ConnString("kg"), "pgcrypto", "icu_und", "sorted", "packed", "hashed")

	// Into a server that has everything, KeepGoing has nothing to leave
	// out: the restore equals the source.
	if err := src.Exec(ctx, "postgres", "CREATE DATABASE full_copy"); err != nil {
		t.Fatal(err)
	}
	failures, err = restoreKeepGoing(t, file, src.ConnString("full_copy"), false)
	if err != nil || len(failures) != 0 {
		t.Errorf("restore with KeepGoing into a full server: %v, failures %v; want none", err, failures)
	}
	pgtest.RequireSameSchema(t, src.BinDir(), src.ConnString("src"), src.ConnString("full_copy"))
	if d := compare.FingerprintDiff(pgtest.Fingerprint(t, src.ConnString("src")), pgtest.Fingerprint(t, src.ConnString("full_copy"))); len(d) > 0 {
		t.Errorf("restore with KeepGoing into a full server: rows differ:\n%s", strings.Join(d, "\n"))
	}
	pgtest.RequireValidIndexes(t, src.ConnString("full_copy"))
}
