package journal

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// TestRecordSQL: the step row names the archive and the step as literals,
// whatever they hold, and goes to the qualified journal table.
func TestRecordSQL(t *testing.T) {
	for _, tc := range []struct {
		id, step, want string
	}{
		{"snap/abc", "load stream 1", `INSERT INTO "pgsprint_journal"."steps" (archive, step) VALUES ('snap/abc', 'load stream 1')`},
		{"o'brien", "it's; DROP TABLE x; --", `INSERT INTO "pgsprint_journal"."steps" (archive, step) VALUES ('o''brien', 'it''s; DROP TABLE x; --')`},
		{"", "", `INSERT INTO "pgsprint_journal"."steps" (archive, step) VALUES ('', '')`},
	} {
		if got := (&Journal{id: tc.id}).RecordSQL(tc.step); got != tc.want {
			t.Errorf("RecordSQL(%q, %q) = %s, want %s", tc.id, tc.step, got, tc.want)
		}
	}
}

// TestFinished: the journal's own rows (begin, target checked) are not
// steps of the work; a nil journal (a fresh restore) has nothing done, and
// the empty step (a task without one) is never done.
func TestFinished(t *testing.T) {
	for _, tc := range []struct {
		name string
		done []string
		want int
	}{
		{"new", []string{stepBegin}, 0},
		{"checked", []string{stepBegin, StepChecked}, 0},
		{"pre-data", []string{stepBegin, StepChecked, StepPreData}, 1},
		{"older pgsprint: no check row", []string{stepBegin, StepPreData, "load stream 1"}, 2},
	} {
		j := &Journal{id: "a", done: map[string]bool{}}
		for _, s := range tc.done {
			j.done[s] = true
		}
		if got := j.Finished(); got != tc.want {
			t.Errorf("%s: Finished() = %d, want %d", tc.name, got, tc.want)
		}
		if !j.IsDone(stepBegin) || j.IsDone("") || j.IsDone("load stream 9") {
			t.Errorf("%s: IsDone wrong", tc.name)
		}
	}
	var none *Journal
	if none.IsDone(StepPreData) {
		t.Error("a nil journal has a step done")
	}
}

// TestArchiveID: the identity is the snapshot and a hash of the whole
// manifest: stable for one manifest, different when any chunk differs.
func TestArchiveID(t *testing.T) {
	m := &archive.Manifest{Snapshot: "00000003-0000001B-1", Chunks: []archive.Chunk{{Stream: 1}, {Stream: 2, Where: "ctid < '(10,0)'"}}}
	id := ArchiveID(m)
	if !strings.HasPrefix(id, m.Snapshot+"/") || len(id) != len(m.Snapshot)+1+16 {
		t.Fatalf("ArchiveID = %q", id)
	}
	if again := ArchiveID(m); again != id {
		t.Errorf("ArchiveID not stable: %s then %s", id, again)
	}
	other := *m
	other.Chunks = []archive.Chunk{{Stream: 1}, {Stream: 2, Where: "ctid < '(11,0)'"}}
	if ArchiveID(&other) == id {
		t.Errorf("two manifests with different chunks share identity %s", id)
	}
}

// TestJournalManifest: the manifest saved with the journal reads back with
// the journal's identity (so a resumed clone's ArchiveID matches); no
// journal reads as nil; a journal saved without a plan cannot be resumed
// as a clone.
func TestJournalManifest(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	cfg, err := pgx.ParseConfig(c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ReadManifest(ctx, cfg); m != nil || err != nil {
		t.Fatalf("no journal: got %v, %v", m, err)
	}
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	comment := "a <comment> & 'quotes'"
	m := &archive.Manifest{Snapshot: "00000003-0000001B-1", SnapshotTime: time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("x", 3600)),
		Tables:       []archive.Table{{Schema: "s", Name: "t\"x", Columns: []string{"a", "b"}, SizeBytes: 1 << 30}},
		Chunks:       []archive.Chunk{{Stream: 1, Table: 0, Where: "ctid < '(10,0)'", Size: 5}, {Stream: 2, Table: 0}},
		LargeObjects: []archive.LargeObject{{Stream: 3, OID: 42, Owner: "o", Comment: &comment}},
	}
	id := ArchiveID(m)
	if _, err := Create(ctx, conn, id, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || ArchiveID(got) != id || got.Chunks[0].Where != m.Chunks[0].Where || *got.LargeObjects[0].Comment != comment {
		t.Fatalf("manifest read back as %+v, identity %s, want %s", got, ArchiveID(got), id)
	}
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+Schema+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(ctx, conn, "snap/abc", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(ctx, cfg); err == nil || !strings.Contains(err.Error(), "no saved plan") {
		t.Fatalf("journal without a plan: got %v", err)
	}
}

// TestClusterJournal: the server journal reads back what was recorded in
// it: whether the run replaces databases, each database begun once however
// often Begin is called, and those finished; a nil journal (a fresh run)
// began none.
func TestClusterJournal(t *testing.T) {
	ctx := context.Background()
	c := pgtest.New(t)
	conn, err := pgx.Connect(ctx, c.ConnString("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var none *Cluster
	if none.HasBegun("a") {
		t.Error("a nil journal began a database")
	}
	var j *Cluster
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
		j, err = CreateCluster(ctx, tx, "snap/abc", true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, db := range []string{"a", "dbé", "a"} {
		if err := j.Begin(ctx, conn, db); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Finish(ctx, conn, "a"); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCluster(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Archive != "snap/abc" || !got.Clean || strings.Join(got.Begun, ",") != "a,dbé" || strings.Join(got.Done, ",") != "a" ||
		!got.HasBegun("dbé") || got.HasBegun("b") {
		t.Fatalf("server journal read back as %+v", got)
	}
	if err := DropCluster(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCluster(ctx, conn); got != nil || err != nil {
		t.Fatalf("after DropCluster: %+v, %v", got, err)
	}
}
