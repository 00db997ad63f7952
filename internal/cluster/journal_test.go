package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/archive/archivetest"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// TestJournalLeftInSource: a source server that holds what unfinished
// pgsprint runs leave behind, a database with the journal of a failed
// restore (schema pgsprint_journal) and the server journal of a
// whole-server restore (role pgsprint_restore_journal), is dumped with a
// warning naming the database, and the journals stay out: Restore and
// Clone with Clean of it succeed (they once failed with "schema already
// exists" and "role already exists"), leaving no journal, with the
// half-restored database's rows as they are.
func TestJournalLeftInSource(t *testing.T) {
	t.Parallel()
	ctx := pgtest.Context(t)
	src, dst := pgtest.New(t), pgtest.New(t)
	for _, db := range []string{"orig", "left"} {
		if err := src.CreateDB(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Exec(ctx, "orig", `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 100);
CREATE TABLE u (id int PRIMARY KEY, t int REFERENCES t); INSERT INTO u SELECT i, i FROM generate_series(1, 10) i;`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.pgs")
	zstd, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	split := chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}
	if _, err := dump.Run(ctx, dump.Options{Source: pgtest.Config(t, src.ConnString("orig")), File: good, Jobs: 1, Codec: zstd, Split: split, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	f, err := archivetest.OpenLocation(t, good, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A restore whose -L list keeps u's foreign key but not t's rows
	// fails after pre-data, leaving "left" with its journal.
	var listed bytes.Buffer
	if err := restore.List(ctx, f.Source, &listed, nil); err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.Split(listed.String(), "\n") {
		if !strings.Contains(l, "TABLE DATA public t ") {
			keep = append(keep, l)
		}
	}
	list := filepath.Join(dir, "no-t.list")
	if err := os.WriteFile(list, []byte(strings.Join(keep, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := restore.Run(ctx, f.Source, restore.Options{Target: pgtest.Config(t, src.ConnString("left")), Where: f.String(), Jobs: 1, UseList: list}); err == nil {
		t.Fatal("the -L restore meant to fail succeeded")
	}
	conn, err := pgx.Connect(ctx, src.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if got := fmt.Sprint(pgtest.UserObjects(t, src.ConnString("left"))); !strings.Contains(got, "schema pgsprint_journal") {
		t.Fatalf("the failed restore left no journal: %s", got)
	}
	// The server journal of a whole-server restore killed on the source.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.CreateCluster(ctx, tx, "an archive restored on the source", false); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	all := filepath.Join(dir, "all.pgs")
	var logged bytes.Buffer
	if _, err := Dump(ctx, DumpOptions{Options: dump.Options{
		Source: pgtest.Config(t, src.ConnString("postgres")), File: all, Jobs: 1, Codec: zstd, Version: "test", Split: split,
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
	}}); err != nil {
		t.Fatalf("dump --all: %v", err)
	}
	if l := logged.String(); !strings.Contains(l, "holds the journal of an unfinished pgsprint restore or clone") || !strings.Contains(l, "database=left") {
		t.Errorf("dump --all warned of no journal in database left:\n%s", l)
	}
	ab, err := location.Parse(all, location.Options{})
	if err != nil {
		t.Fatal(err)
	}
	af, err := archive.OpenLocation(ctx, ab, archive.OpenOptions{Access: archive.Scan})
	if err != nil {
		t.Fatal(err)
	}
	m, _, streams, err := archive.Summarize(af.Source)
	af.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range archive.DatabaseSummaries(m, streams) {
		for _, tb := range d.Tables {
			if tb.Schema == journal.Schema {
				t.Errorf("the archive holds %s.%s of database %s", tb.Schema, tb.Name, d.Name)
			}
		}
	}
	check := func(how string) {
		t.Helper()
		for _, db := range []string{"orig", "left"} {
			fs, fd := pgtest.Fingerprint(t, src.ConnString(db)), pgtest.Fingerprint(t, dst.ConnString(db))
			for _, rel := range []string{"public.t", "public.u"} {
				if fs[rel] == "" || fs[rel] != fd[rel] {
					t.Errorf("%s: database %s, %s: source %q, target %q", how, db, rel, fs[rel], fd[rel])
				}
			}
			if got := fmt.Sprint(pgtest.UserObjects(t, dst.ConnString(db))); strings.Contains(got, "pgsprint_journal") {
				t.Errorf("%s left the journal in database %s: %s", how, db, got)
			}
		}
		var n int
		dc, err := pgx.Connect(ctx, dst.ConnString("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		defer dc.Close(ctx)
		if err := dc.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", journal.ClusterRole).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s left role %s on the target (%d, %v)", how, journal.ClusterRole, n, err)
		}
	}
	restoreAll(t, all, dst.ConnString("postgres"), 1)
	check("restore --all")
	cloneAll(t, src.ConnString("postgres"), dst.ConnString("postgres"), 1, true)
	check("clone --all --clean")
}
