package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// largeObjectsDDL makes 3000 large objects, read and restored in batches:
// small ones of different sizes, empty ones, ones on and around the dump's
// 64 KiB head and the restore's 1 MiB piece, one over several pieces, with
// owners, privileges in a chosen order (PUBLIC after the owner, a grant
// option) and comments, some in every batch.
const largeObjectsDDL = `
CREATE ROLE "lo ""owner";
SELECT pg_catalog.lo_from_bytea(0, pg_catalog.convert_to(repeat(chr(65 + g % 26), g % 300), 'UTF8')) FROM generate_series(1, 2990) g;
SELECT pg_catalog.lo_from_bytea(0, pg_catalog.decode(repeat('00ff', n / 2), 'hex')) FROM unnest(ARRAY[65536, 65538, 1048576, 1048578, 2621440]) n;
SELECT pg_catalog.lo_from_bytea(0, ''::bytea) FROM generate_series(1, 5);
DO $$
DECLARE o oid;
BEGIN
	FOR o IN SELECT oid FROM pg_catalog.pg_largeobject_metadata WHERE oid::int8 % 7 = 0 LOOP
		EXECUTE format('ALTER LARGE OBJECT %s OWNER TO %I', o, 'lo "owner');
		EXECUTE format('GRANT SELECT ON LARGE OBJECT %s TO PUBLIC', o);
		EXECUTE format('COMMENT ON LARGE OBJECT %s IS %L', o, 'object ' || o || E'\n''s');
	END LOOP;
	FOR o IN SELECT oid FROM pg_catalog.pg_largeobject_metadata WHERE oid::int8 % 11 = 0 LOOP
		EXECUTE format('GRANT UPDATE ON LARGE OBJECT %s TO %I WITH GRANT OPTION', o, 'lo "owner');
	END LOOP;
END $$;
`

// TestLargeObjectBatches dumps and restores a few thousand large objects,
// which both sides handle in batches, and compares every object's
// contents, owner, privileges (in order) and comment: from a file, from a
// pipe, and again with --clean over the first restore.
func TestLargeObjectBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := pgtest.New(t)
	if err := c.CreateDB(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := c.ExecPsql(ctx, "src", largeObjectsDDL); err != nil {
		t.Fatal(err)
	}
	src := c.ConnString("src")
	if n := pgtest.Scalar(t, src, "SELECT count(*) FROM pg_largeobject_metadata"); n != "3000" {
		t.Fatalf("source has %s large objects, want 3000", n)
	}
	file := filepath.Join(t.TempDir(), "lo.pgs")
	mustPgsprint(t, "dump", "-d", src, "-f", file, "-j", "2", "-q")
	same := func(db string) {
		t.Helper()
		if r := pgsprint(t, nil, "compare", "--source", src, "--target", c.ConnString(db), "-j", "2"); r.code != 0 {
			t.Errorf("compare with %s: exit %d\n%s%s", db, r.code, r.stdout, r.stderr)
		}
	}
	if err := c.CreateDB(ctx, "dst"); err != nil {
		t.Fatal(err)
	}
	mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("dst"), "-j", "2", "-q")
	same("dst")

	mustPgsprint(t, "restore", "-f", file, "-d", c.ConnString("dst"), "-j", "2", "-q", "--clean")
	same("dst")

	archive, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDB(ctx, "piped"); err != nil {
		t.Fatal(err)
	}
	if r := pgsprintStdin(t, nil, bytes.NewReader(archive), "restore", "-f", "-", "-d", c.ConnString("piped"), "-j", "2", "-q"); r.code != 0 {
		t.Fatalf("restore -f -: exit %d\n%s", r.code, r.stderr)
	}
	same("piped")
}
