package clone

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// TestKeepGoingClone clones, with KeepGoing, the PostgreSQL 15 source of
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
	if _, err := dump.Run(pgtest.Context(t), dumpOptions(t, src.ConnString("src"), file, 2, "zstd:1", 0)); err != nil {
		t.Fatalf("dump: %v", err)
	}
	ropts := restoreOptions(t, dst.ConnString("restored"), 2)
	ropts.KeepGoing = true
	var incomplete *restore.IncompleteError
	if err := restoreWith(pgtest.Context(t), t, file, ropts); !errors.As(err, &incomplete) {
		t.Fatalf("restore with KeepGoing: %v, want an IncompleteError", err)
	}

	opts := cloneOptions(t, src.ConnString("src"), dst.ConnString("cloned"), 2, 0)
	opts.KeepGoing = true
	res, err := Run(pgtest.Context(t), opts)
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
