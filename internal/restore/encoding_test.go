package restore

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// requireSameEncoded compares two databases as pg_dump's schema read in
// UTF8 and per-table row hashes computed in UTF8 (what `pgsprint compare`
// compares).
func requireSameEncoded(t *testing.T, acrossVersions bool, binDir, src, dst string) {
	t.Helper()
	if acrossVersions {
		pgtest.RequireSameSchemaAcrossVersions(t, binDir, src, dst)
	} else {
		pgtest.RequireSameSchema(t, binDir, src, dst)
	}
	ctx := pgtest.Context(t)
	a, err := compare.FingerprintParallel(ctx, pgtest.Config(t, src), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := compare.FingerprintParallel(ctx, pgtest.Config(t, dst), 2)
	if err != nil {
		t.Fatal(err)
	}
	if d := compare.FingerprintDiff(a, b); len(d) > 0 {
		t.Fatalf("rows differ: %v", d)
	}
}

// requireEncodingRefusal checks that a restore failed with one line naming
// both encodings.
func requireEncodingRefusal(t *testing.T, err error, from, to string) {
	t.Helper()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), from) || !strings.Contains(err.Error(), to) {
		t.Fatalf("want a one-line refusal naming %s and %s, got: %v", from, to, err)
	}
	t.Log(err)
}

// TestEncodingMatrix dumps a database of every server encoding, with
// non-ASCII text in names, values, TOASTed values, arrays, JSON, enum
// labels, comments and a large object, and restores it from a file into
// a database of the same encoding and into UTF8, and a table of it named
// by its non-ASCII name. A SQL_ASCII source with bytes invalid in UTF8
// cannot go into UTF8 (pg_restore cannot either): the restore is refused
// up front. `make test` runs pgtest.EveryPathUnderTest's encodings, `make
// test-long` every one. (cmd/pgsprint's TestEncodingPaths takes the pipe,
// clone, list and --to-sql paths.)
func TestEncodingMatrix(t *testing.T) {
	t.Parallel()
	c := pgtest.New(t)
	runEncodingMatrix(t, c, c)
}

// runEncodingMatrix runs the matrix with sources in cluster sc and targets
// in cluster tc.
func runEncodingMatrix(t *testing.T, sc, tc *pgtest.Instance) {
	dir := t.TempDir()
	bin := tc.BinDir()
	across := sc.Version() != tc.Version()
	if sc.Version() > tc.Version() {
		bin = sc.BinDir()
	}
	for _, ec := range pgtest.EncodingCases {
		if !pgtest.EveryPathUnderTest(ec.Enc) {
			continue
		}
		t.Run(ec.Enc, func(t *testing.T) {
			src := "src_" + strings.ToLower(ec.Enc)
			pgtest.LoadEncodingCase(t, sc, src, ec)
			srcConn := sc.ConnString(src)
			file := filepath.Join(dir, src+".pgs")
			dumpFile(t, srcConn, file, func(o *dump.Options) { o.Jobs = 2 })

			same := src + "_same"
			pgtest.CreateEncodedDB(t, tc, same, ec.Enc)
			mustRestore(t, file, tc.ConnString(same), func(o *Options) { o.Jobs = 2 })
			requireSameEncoded(t, across, bin, srcConn, tc.ConnString(same))

			utf := src + "_utf8"
			pgtest.CreateEncodedDB(t, tc, utf, "UTF8")
			err := restoreFile(t, file, tc.ConnString(utf), func(o *Options) { o.Jobs = 2 })
			// UTF8 holds every encoding's text but a SQL_ASCII
			// database's bytes that are not UTF8, which go into
			// SQL_ASCII only (as with pg_restore).
			if ec.Enc == "SQL_ASCII" {
				requireEncodingRefusal(t, err, "SQL_ASCII", "UTF8")
			} else {
				if err != nil {
					t.Fatalf("restore into UTF8: %v", err)
				}
				requireSameEncoded(t, across, bin, srcConn, tc.ConnString(utf))
			}

			// A filter naming the non-ASCII table picks it and only it.
			filtered := src + "_t"
			pgtest.CreateEncodedDB(t, tc, filtered, ec.Enc)
			mustRestore(t, file, tc.ConnString(filtered), func(o *Options) { o.Filter.Tables = []string{ec.Word} })
			want := pgtest.SchemaDump(t, bin, srcConn, "-t", pg.Qualified("public", ec.Word))
			got := pgtest.SchemaDump(t, bin, tc.ConnString(filtered))
			if want != got {
				t.Fatalf("restore -t %q: schema differs from pg_dump -t:\n--- want\n%s\n--- got\n%s", ec.Word, want, got)
			}
		})
	}
}

// TestEncodingMatrixOtherVersion runs the matrix with sources on the
// oldest other major version installed, restored into PostgreSQL 15 (the
// same encodings as TestEncodingMatrix). Under make test-long only: the
// encodings are converted by the COPY of the session's client_encoding,
// the same on every version (TestEncodingMatrix), and a dump of another
// version restored into this one is internal/clone's TestCrossVersion.
func TestEncodingMatrixOtherVersion(t *testing.T) {
	if !pgtest.Long {
		t.Skip("under make test-long only: TestEncodingMatrix and TestCrossVersion cover its parts")
	}
	t.Parallel()
	versions := pgtest.VersionsOrSkip(t, 2)
	other := versions[0]
	if other == 15 {
		other = versions[len(versions)-1]
	}
	dir, err := pgtest.BinDirFor(other)
	if err != nil {
		t.Fatal(err)
	}
	runEncodingMatrix(t, pgtest.New(t, pgtest.Options{BinDir: dir}), pgtest.New(t))
}

// TestEncodingConversions restores a LATIN1 database's UTF8 copy into
// LATIN1 (the text fits), and refuses UTF8 text LATIN1 cannot hold with
// one line naming the table and both encodings. (cmd/pgsprint's
// TestEncodingConversionPaths kills and resumes such a restore, and
// compares across encodings.)
func TestEncodingConversions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.Shared(t)
	dir := t.TempDir()
	name := func(db string) string { return pgtest.UniqueName(db) }
	dbs := map[string]string{}
	create := func(t *testing.T, db, enc string) string {
		dbs[db] = name(db)
		pgtest.CreateEncodedDB(t, c, dbs[db], enc)
		t.Cleanup(func() { pgtest.DropDB(t, c, dbs[db]) })
		return c.ConnString(dbs[db])
	}
	latin := pgtest.EncodingCases[1]
	dbs["latin"] = name("latin")
	pgtest.LoadEncodingCase(t, c, dbs["latin"], latin)
	t.Cleanup(func() { pgtest.DropDB(t, c, dbs["latin"]) })
	latinConn := c.ConnString(dbs["latin"])
	latinFile := filepath.Join(dir, "latin.pgs")
	dumpFile(t, latinConn, latinFile, nil)
	utf := create(t, "utf", "UTF8")
	mustRestore(t, latinFile, utf, nil)

	t.Run("UTF8 into LATIN1 when it fits", func(t *testing.T) {
		file := filepath.Join(dir, "utf.pgs")
		dumpFile(t, utf, file, nil)
		back := create(t, "back", "LATIN1")
		mustRestore(t, file, back, nil)
		requireSameEncoded(t, false, c.BinDir(), latinConn, back)
	})

	t.Run("UTF8 names LATIN1 lacks are refused before loading", func(t *testing.T) {
		wide := create(t, "wide", "UTF8")
		execSQL(t, wide, "CREATE TABLE \"\u20ac\" (v text); INSERT INTO \"\u20ac\" VALUES ('x')")
		file := filepath.Join(dir, "wide.pgs")
		dumpFile(t, wide, file, nil)
		create(t, "narrow", "LATIN1")
		err := restoreFile(t, file, c.ConnString(dbs["narrow"]), nil)
		requireEncodingRefusal(t, err, "UTF8", "LATIN1")
		if !strings.Contains(err.Error(), "\u20ac") {
			t.Errorf("the refusal does not name the table: %v", err)
		}
		var n int
		if err := pgtest.ClientConn(t, c, dbs["narrow"], "UTF8").QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the refused restore created %d relations (%v)", n, err)
		}
	})

	t.Run("UTF8 values LATIN1 lacks fail naming the table", func(t *testing.T) {
		wide := create(t, "wideval", "UTF8")
		execSQL(t, wide, "CREATE TABLE \"caf\u00e9\" (v text); INSERT INTO \"caf\u00e9\" VALUES ('\u20ac')")
		file := filepath.Join(dir, "wideval.pgs")
		dumpFile(t, wide, file, nil)
		narrow := create(t, "narrowval", "LATIN1")
		err := restoreFile(t, file, narrow, nil)
		requireEncodingRefusal(t, err, "UTF8", "LATIN1")
		if !strings.Contains(err.Error(), "caf\u00e9") {
			t.Errorf("the failure does not name the table: %v", err)
		}
	})
}
