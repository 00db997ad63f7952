package main

import (
	"context"
	"os"
	"testing"
)

// TestUnpackedArchiveRestores restores testdata/unpacked.pgs, written by
// pgsprint before packed frames (format version 1: a stream of frames and
// an End frame for every table and large object), into a database and
// compares it with testdata/unpacked.sql run afresh: schema, every
// table's rows, large objects with their comment. It does so from the
// file and from a pipe (-f -), so that both readers still take the old
// layout.
func TestUnpackedArchiveRestores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := shared(t)
	sql, err := os.ReadFile("testdata/unpacked.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{"src", "file", "pipe"} {
		if err := c.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ExecPsql(ctx, "src", string(sql)); err != nil {
		t.Fatal(err)
	}
	mustPgsprint(t, "verify", "testdata/unpacked.pgs")
	mustPgsprint(t, "restore", "-d", c.ConnString("file"), "-j", "2", "-q", "-f", "testdata/unpacked.pgs")
	f, err := os.Open("testdata/unpacked.pgs")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if r := pgsprintStdin(t, nil, f, "restore", "-d", c.ConnString("pipe"), "-j", "2", "-q", "-f", "-"); r.code != 0 {
		t.Fatalf("restore -f -: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, db := range []string{"file", "pipe"} {
		if r := pgsprint(t, nil, "compare", "--source", c.ConnString("src"), "--target", c.ConnString(db)); r.code != 0 {
			t.Errorf("compare with the restore from %s: exit %d\n%s%s", db, r.code, r.stdout, r.stderr)
		}
	}
}
