package clone

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/preflight"
	"github.com/pgsprint/pgsprint/internal/toc"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestKeepGoingClone checks preflight's restore and clone checks of the
// target that lacks things, then clones, with KeepGoing, the PostgreSQL 15 source of
// TestKeepGoing (internal/restore) into a PostgreSQL 18 that lacks ICU,
// lz4, pgcrypto, the tablespace and the role: Run returns an
// IncompleteError whose failures name the collation, the clone holds
// exactly the relations a restore with KeepGoing of the same source's
// dump holds, and every table the source's rows.
func TestKeepGoingClone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := pgtest.KeepGoingPair(t)
	for _, db := range []string{"restored", "cloned"} {
		if err := dst.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "kg.pgs")
	if _, err := dump.Run(testContext(t), dumpOptions(t, src.ConnString("src"), file, 2, "zstd:1", 0)); err != nil {
		t.Fatalf("dump: %v", err)
	}
	requirePreflightLacks(t, file, dst.ConnString("restored"))
	ropts := restoreOptions(t, dst.ConnString("restored"), 2)
	ropts.KeepGoing = true
	var incomplete *restore.IncompleteError
	if err := restoreWith(testContext(t), t, file, ropts); !errors.As(err, &incomplete) {
		t.Fatalf("restore with KeepGoing: %v, want an IncompleteError", err)
	}

	opts := cloneOptions(t, src.ConnString("src"), dst.ConnString("cloned"), 2, 0)
	requirePreflightCloneLacks(t, opts)
	opts.KeepGoing = true
	res, err := Run(testContext(t), opts)
	t.Logf("clone with KeepGoing: %v", err)
	if !errors.As(err, &incomplete) {
		t.Fatalf("clone with KeepGoing: %v, want an IncompleteError", err)
	}
	if res == nil || !slices.ContainsFunc(res.Failures, func(f restore.Failure) bool { return f.Object == "COLLATION public.icu_und" && f.Error != "" }) {
		t.Errorf("the clone's failures do not name COLLATION public.icu_und with its error")
	}
	if got, want := pgtest.Relations(t, dst.ConnString("cloned")), pgtest.Relations(t, dst.ConnString("restored")); !slices.Equal(got, want) {
		t.Errorf("the clone holds %v, the restore %v", got, want)
	}
	pgtest.RequireRestoredRows(t, src.ConnString("src"), dst.ConnString("cloned"))
	pgtest.RequireValidIndexes(t, dst.ConnString("cloned"))
}

// checklist runs check without and with KeepGoing and returns each
// checklist as `pgsprint preflight` prints it, with whether it was ready.
func checklist(t *testing.T, check func(keepGoing bool) *preflight.Checklist) (without, with string, readyWithout, readyWith bool) {
	t.Helper()
	var b [2]strings.Builder
	var ok [2]bool
	for i, keepGoing := range []bool{false, true} {
		c := check(keepGoing)
		if err := c.Print(&b[i]); err != nil {
			t.Fatal(err)
		}
		ok[i] = c.OK()
		t.Logf("preflight (keep going %v):\n%s", keepGoing, b[i].String())
	}
	return b[0].String(), b[1].String(), ok[0], ok[1]
}

// requirePreflightLacks checks preflight.Restore of the keep-going
// archive (file) into target, which lacks what pgtest.KeepGoingPair's
// lacks: every missing thing is named with the objects that need it;
// without KeepGoing it is not ready, as the restore would stop; with it,
// it is ready and names what would be left out or created without its
// owner or tablespace.
func requirePreflightLacks(t *testing.T, file, target string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	ar, err := archive.Open(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	without, with, readyWithout, readyWith := checklist(t, func(keepGoing bool) *preflight.Checklist {
		return preflight.Restore(testContext(t), preflight.RestoreOptions{
			Target: connConfig(t, target), Jobs: 1, Archive: ar, Where: file, Programs: &pgbin.Finder{}, KeepGoing: keepGoing,
			Contents: func(ctx context.Context) ([]toc.Entry, error) { return restore.Contents(ctx, ar, restore.Options{}) },
		})
	})
	if readyWithout || !strings.Contains(without, "not ready") {
		t.Errorf("preflight restore into a target that lacks things: ready, want not ready")
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto", needed by EXTENSION pgcrypto`,
		`✗ target collations: the target lacks collation provider "icu", needed by COLLATION public.icu_und`,
		`✗ target compression: the target lacks compression method "lz4", needed by TABLE app.packed, TABLE DATA app.packed`,
		`✗ target roles: the target lacks role "kg_owner", owner of TABLE app.owned`,
		`✗ target tablespaces: the target lacks tablespace "kg_space", where TABLE app.placed go`,
		"the run would stop at the first",
	} {
		if !strings.Contains(without, want) {
			t.Errorf("preflight restore does not say %q", want)
		}
	}
	if !readyWith || !strings.Contains(with, "ready: the run would start") {
		t.Errorf("preflight restore with KeepGoing: not ready, want ready")
	}
	for _, want := range []string{
		`! target extensions: the target lacks extension "pgcrypto"`, "--keep-going leaves them out, and skips the", "TABLE app.hashed",
		"! target collations:", "TABLE app.sorted", "INDEX app.sorted_name", "VIEW app.sorted_names",
		"! target compression:", "! target roles:", "--keep-going creates them owned by",
		"! target tablespaces:", "--keep-going creates them in the default tablespace",
	} {
		if !strings.Contains(with, want) {
			t.Errorf("preflight restore with KeepGoing does not say %q", want)
		}
	}
}

// requirePreflightCloneLacks checks preflight.Clone of the keep-going
// source into opts' target as requirePreflightLacks does the restore's:
// the source's schema, read as the clone reads it (Contents), says what
// the target lacks.
func requirePreflightCloneLacks(t *testing.T, opts Options) {
	t.Helper()
	without, with, readyWithout, readyWith := checklist(t, func(keepGoing bool) *preflight.Checklist {
		return preflight.Clone(testContext(t), preflight.CloneOptions{
			Source: opts.Session.Source, Target: opts.Target, Jobs: opts.Jobs, Programs: &pgbin.Finder{}, KeepGoing: keepGoing,
			Contents: func(ctx context.Context) ([]toc.Entry, error) { return Contents(ctx, opts) },
		})
	})
	if readyWithout || !strings.Contains(without, "not ready") {
		t.Errorf("preflight clone into a target that lacks things: ready, want not ready")
	}
	for _, want := range []string{
		`✗ target extensions: the target lacks extension "pgcrypto"`, `✗ target collations: the target lacks collation provider "icu"`,
		`✗ target compression: the target lacks compression method "lz4"`, `✗ target roles: the target lacks role "kg_owner"`,
		`✗ target tablespaces: the target lacks tablespace "kg_space"`,
	} {
		if !strings.Contains(without, want) {
			t.Errorf("preflight clone does not say %q", want)
		}
	}
	if !readyWith || !strings.Contains(with, "ready: the run would start") {
		t.Errorf("preflight clone with KeepGoing: not ready, want ready")
	}
	for _, want := range []string{"! target extensions:", "! target collations:", "! target compression:", "! target roles:", "! target tablespaces:", "TABLE app.sorted"} {
		if !strings.Contains(with, want) {
			t.Errorf("preflight clone with KeepGoing does not say %q", want)
		}
	}
}
