package restore

// Helpers shared by this package's tests that dump a real database and
// restore it through Run: the dump (dump.Run, as `pgsprint dump` calls
// it), the restore of an archive file, and the checks of what was
// restored (pg_dump's schema and per-table row hashes, via pgtest).

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dumpFile dumps the database at conn into file as `pgsprint dump` does by
// default (zstd:1, chunks of chunk.DefaultSize), after edit changes the
// options (nil: none).
func dumpFile(t testing.TB, conn, file string, edit func(*dump.Options)) {
	t.Helper()
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	opts := dump.Options{
		Source: pgtest.Config(t, conn), File: file, Jobs: 1, Codec: c,
		Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}, Version: "test",
	}
	if edit != nil {
		edit(&opts)
	}
	if _, err := dump.Run(pgtest.Context(t), opts); err != nil {
		t.Fatalf("dump %s: %v", file, err)
	}
}

// restoreFile restores archive file into the database at conn through Run
// (as `pgsprint restore -f file -d conn`), after edit changes the options
// (nil: none), and returns Run's error.
func restoreFile(t testing.TB, file, conn string, edit func(*Options)) error {
	t.Helper()
	var res *Result
	return restoreRun(t, file, conn, edit, &res)
}

// restoreRun is restoreFile that also hands back Run's result (nil
// when it ended before one).
func restoreRun(t testing.TB, file, conn string, edit func(*Options), res **Result) error {
	t.Helper()
	ctx := pgtest.Context(t)
	f, err := archivetest.OpenLocation(t, file, nil)
	if err != nil {
		return err
	}
	opts := Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: 1}
	if edit != nil {
		edit(&opts)
	}
	*res, err = Run(ctx, f.Source, opts)
	return err
}

// mustRestore is restoreFile that fails the test on an error.
func mustRestore(t testing.TB, file, conn string, edit func(*Options)) {
	t.Helper()
	if err := restoreFile(t, file, conn, edit); err != nil {
		t.Fatalf("restore %s: %v", file, err)
	}
}

// sameRelations compares, between the databases at src and dst, what
// pg_dump says of each relation (with its indexes, constraints, triggers)
// and the relation's rows.
func sameRelations(t testing.TB, binDir, src, dst string, rels ...string) {
	t.Helper()
	for _, rel := range rels {
		want := pgtest.SchemaDump(t, binDir, src, "-t", rel)
		if got := pgtest.SchemaDump(t, binDir, dst, "-t", rel); got != want {
			t.Errorf("%s: schema differs:\n%s\nwant:\n%s", rel, got, want)
		}
	}
	pgtest.RequireData(t, src, dst, rels...)
}

// execSQL runs sql (several statements) in the database at conn.
func execSQL(t testing.TB, conn, sql string) {
	t.Helper()
	pgtest.WithConn(t, conn, func(ctx context.Context, cn *pgx.Conn) {
		if _, err := cn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	})
}
