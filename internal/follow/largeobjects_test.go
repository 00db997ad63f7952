package follow

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// testLargeObjects: large objects created (an empty one, and more than
// one batch of them), changed (contents of a small one and, mid-chunk, of
// one over a chunk; owner, privileges, comment) and deleted on the source
// while it is followed are on the target after Finish, which says what it
// did: logical replication carried none of it. It runs on
// TestFinishFenced's cluster.
func testLargeObjects(t *testing.T, c *pgtest.Instance) {
	ctx := context.Background()
	o := newCase(t, c, `CREATE TABLE keyed (id int PRIMARY KEY, v text);
		INSERT INTO keyed SELECT i, 'v' || i FROM generate_series(1, 100) i;
		DO $$ BEGIN CREATE ROLE "lo ""reader"""; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
		SELECT lo_from_bytea(1001, 'small');
		SELECT lo_from_bytea(1002, 'with metadata');
		GRANT SELECT ON LARGE OBJECT 1002 TO PUBLIC;
		COMMENT ON LARGE OBJECT 1002 IS 'before';
		SELECT lo_from_bytea(1003, 'to be deleted');
		SELECT lo_from_bytea(1004, decode(repeat('0123456789abcdef', 3 * 65536 + 7), 'hex'));
		SELECT lo_from_bytea(1005, 'unchanged')`)
	following(t, o)
	exec(t, o.Source, `SELECT lo_from_bytea(2001, 'created while followed');
		SELECT lo_from_bytea(2002, '');
		SELECT lo_from_bytea(3000 + i, convert_to('batch ' || i, 'UTF8')) FROM generate_series(1, 40) i;
		SELECT lo_put(1001, 2, 'ALL and longer');
		GRANT UPDATE ON LARGE OBJECT 1002 TO "lo ""reader""";
		ALTER LARGE OBJECT 1002 OWNER TO "lo ""reader""";
		COMMENT ON LARGE OBJECT 1002 IS 'after';
		SELECT lo_unlink(1003);
		SELECT lo_put(1004, 1048570, 'across the chunk boundary');
		UPDATE keyed SET v = 'followed' WHERE id = 1`)
	waitFor(t, o.Target, "followed", "SELECT v FROM keyed WHERE id = 1")
	if got := scalar(t, o.Target, "SELECT string_agg(oid::text, ',' ORDER BY oid) FROM pg_largeobject_metadata"); got != "1001,1002,1003,1004,1005" {
		t.Fatalf("the target's large objects before finish: %s: replication carried some, the test proves nothing", got)
	}
	var out bytes.Buffer
	res, err := Finish(ctx, FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute,
		Grace: time.Second, Out: &out, Verify: sameData(o.Source, o.Target)})
	if err != nil {
		t.Fatalf("Finish: %v\n%s", err, out.String())
	}
	if want := (LargeObjectSync{Created: 42, Changed: 3, Deleted: 1, Source: 46}); res.LargeObjects != want {
		t.Errorf("Finish's large objects: %+v, want %+v", res.LargeObjects, want)
	}
	if want := "large objects: 42 created, 3 changed, 1 deleted (the source has 46)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("Finish's output lacks %q:\n%s", want, out.String())
	}
	if !res.Verified || res.WriteDowntime <= 0 {
		t.Errorf("Finish: %+v", res)
	}
	if d := compare.FingerprintDiff(fingerprint(t, o.Source), fingerprint(t, o.Target)); len(d) > 0 {
		t.Errorf("target differs from the source:\n%s", strings.Join(d, "\n"))
	}
	if got := scalar(t, o.Target, "SELECT pg_get_userbyid(lomowner) || ' ' || lomacl::text FROM pg_largeobject_metadata WHERE oid = 1002"); !strings.HasPrefix(got, `lo "reader" {`) || !strings.Contains(got, `"=r/`) {
		t.Errorf("large object 1002 on the target: %s", got)
	}
	nothingLeft(t, o.Source, o.Target, o.Names)
}
