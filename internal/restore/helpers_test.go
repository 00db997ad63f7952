package restore

// Helpers shared by this package's tests that dump a real database and
// restore it through Run: the dump (dump.Run, as `pgsprint dump` calls
// it), the restore of an archive file, and the checks of what was
// restored (pg_dump's schema and per-table row hashes, via pgtest).

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/store/location"
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
	ctx := pgtest.Context(t)
	b, err := location.Parse(file, location.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Parallel, SpillDir: t.TempDir()})
	if err != nil {
		return err
	}
	defer f.Close()
	opts := Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: 1}
	if edit != nil {
		edit(&opts)
	}
	_, err = Run(ctx, f.Source, opts)
	return err
}

// mustRestore is restoreFile that fails the test on an error.
func mustRestore(t testing.TB, file, conn string, edit func(*Options)) {
	t.Helper()
	if err := restoreFile(t, file, conn, edit); err != nil {
		t.Fatalf("restore %s: %v", file, err)
	}
}

// requireError fails unless err is one line mentioning sub.
func requireError(t testing.TB, err error, sub string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", sub)
	}
	t.Logf("error: %v", err)
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error is more than one line:\n%v", err)
	}
	if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(sub)) {
		t.Errorf("error does not mention %q: %v", sub, err)
	}
}

// scalar runs a query returning one value, as text.
func scalar(t testing.TB, conn, sql string) string {
	t.Helper()
	ctx := context.Background()
	cn, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	var v string
	if err := cn.QueryRow(ctx, "SELECT ("+sql+")::text").Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// requireData compares the row hashes of the named relations (as quoted
// qualified names, or plain ones pg_dump-style) on both sides.
func requireData(t testing.TB, a, b string, rels ...string) {
	t.Helper()
	fa, fb := pgtest.Fingerprint(t, a), pgtest.Fingerprint(t, b)
	for _, rel := range rels {
		key := fingerprintKey(rel)
		if fa[key] == "" || fa[key] != fb[key] {
			t.Errorf("%s: source %q, restored %q", rel, fa[key], fb[key])
		}
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
	requireData(t, src, dst, rels...)
}

// onlyRelations fails unless the user tables, views and sequences of the
// database at conn are exactly rels (plus pgsprint's own nothing: the
// journal must be gone).
func onlyRelations(t testing.TB, conn string, rels ...string) {
	t.Helper()
	fp := pgtest.Fingerprint(t, conn)
	want := map[string]bool{}
	for _, r := range rels {
		want[fingerprintKey(r)] = true
	}
	for k := range fp {
		if !want[k] && !strings.HasPrefix(k, "large object") {
			t.Errorf("unexpected relation restored: %s", k)
		}
	}
	for k := range want {
		if _, ok := fp[k]; !ok {
			t.Errorf("relation missing: %s", k)
		}
	}
}

// fingerprintKey turns app.orders or a quoted name into the fingerprint's
// format('%I.%I') key.
func fingerprintKey(rel string) string {
	if strings.HasPrefix(rel, `"`) {
		return rel
	}
	schema, name, _ := strings.Cut(rel, ".")
	return fmtID(schema) + "." + fmtID(name)
}

// fmtID quotes an identifier as pg_dump prints it: only when needed.
func fmtID(s string) string {
	if regexp.MustCompile(`^[a-z_][a-z0-9_]*$`).MatchString(s) {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// execSQL runs sql (several statements) in the database at conn.
func execSQL(t testing.TB, conn, sql string) {
	t.Helper()
	ctx := context.Background()
	cn, err := pgx.Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close(ctx)
	if _, err := cn.PgConn().Exec(ctx, sql).ReadAll(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
