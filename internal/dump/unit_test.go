package dump

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
	"github.com/pgsprint/pgsprint/internal/progress"
)

// TestManifestLayout checks how a catalog becomes the archive's stream
// layout: the schema is stream 0, then one stream per chunk in table
// order, then one per large object; every table records its filenode;
// only tables of built-in types go in binary, and only when the reader's
// major is the source's; the estimates go to the sizes map.
func TestManifestLayout(t *testing.T) {
	comment := "lo comment"
	cat := &catalog{
		tables: []pg.TableInfo{
			{OID: 100, Schema: "s", Name: "big", Columns: []string{"id", "v"}, Pages: 10, Rows: 1000, SizeBytes: 81920, BuiltinTypes: true},
			{OID: 200, Schema: "s", Name: `odd "name"`, Columns: []string{"c"}, SizeBytes: 8192},
		},
		filenodes: map[uint32]uint32{100: 1100, 200: 1200},
		chunks: [][]chunk.Chunk{
			{{Where: "ctid < '(5,0)'", Size: 40960}, {Where: "ctid >= '(5,0)'", Size: 40960}},
			{{Size: 8192}},
		},
		sequences:    []pg.SequenceInfo{{Schema: "s", Name: "seq", LastValue: 7, IsCalled: true}},
		largeObjects: []pg.LargeObjectInfo{{OID: 5000, Owner: "o", HasACL: true, Comment: &comment, Grants: []pg.LargeObjectGrant{{Grantee: "", Privilege: "SELECT"}}}},
		matviews:     [][2]string{{"s", "mv"}},
		schemas:      []pg.Object{{OID: 1, Name: "s"}},
		relations:    []pg.Object{{OID: 100, Schema: "s", Name: "big", Kind: "r"}},
	}
	srv := pg.Server{Version: "16.4", VersionNum: 160004, Database: "db", Encoding: "LATIN1"}
	snap := &pg.Snapshot{ID: "00000003-0000000A-1", Time: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)}
	tools := pgbin.Tools{Major: 17, Version: "17.2"}

	for _, tc := range []struct {
		name     string
		opts     SessionOptions
		binary   []bool // per chunk
		dataOnly bool
	}{
		{"dump", SessionOptions{Jobs: 3, BlockSize: 1 << 20, Version: "v1"}, []bool{false, false, false}, false},
		{"clone, same major", SessionOptions{Jobs: 2, BinaryForMajor: 16}, []bool{true, true, false}, false},
		{"clone, other major", SessionOptions{Jobs: 2, BinaryForMajor: 17}, []bool{false, false, false}, false},
		{"data only", SessionOptions{Filter: filter.Options{Selection: filter.Selection{DataOnly: true}}}, []bool{false, false, false}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sizes := cat.manifest(srv, snap, tools, tc.opts)
			if m.SchemaStream != 0 || m.Snapshot != snap.ID || !m.SnapshotTime.Equal(snap.Time) || m.PgDumpVersion != "17.2" ||
				m.Encoding != "LATIN1" || m.CopyEncoding != "LATIN1" || m.ServerVersionNum != 160004 || m.Database != "db" ||
				m.ToolVersion != tc.opts.Version || m.BlockSize != tc.opts.BlockSize || m.DataOnly != tc.dataOnly {
				t.Errorf("manifest header %+v", m)
			}
			if want := max(tc.opts.Jobs, 1) + 1; m.MaxInterleave != want {
				t.Errorf("MaxInterleave %d, want %d (the workers and pg_dump)", m.MaxInterleave, want)
			}
			wantTables := []archive.Table{
				{OID: 100, Filenode: 1100, Schema: "s", Name: "big", Columns: []string{"id", "v"}, Pages: 10, SizeBytes: 81920, Rows: 1000},
				{OID: 200, Filenode: 1200, Schema: "s", Name: `odd "name"`, Columns: []string{"c"}, SizeBytes: 8192},
			}
			if !reflect.DeepEqual(m.Tables, wantTables) {
				t.Errorf("tables %+v", m.Tables)
			}
			wantChunks := []archive.Chunk{
				{Stream: 1, Table: 0, Where: "ctid < '(5,0)'", Size: 40960, Binary: tc.binary[0]},
				{Stream: 2, Table: 0, Where: "ctid >= '(5,0)'", Size: 40960, Binary: tc.binary[1]},
				{Stream: 3, Table: 1, Size: 8192, Binary: tc.binary[2]},
			}
			if !reflect.DeepEqual(m.Chunks, wantChunks) {
				t.Errorf("chunks %+v, want %+v", m.Chunks, wantChunks)
			}
			wantLO := []archive.LargeObject{{Stream: 4, OID: 5000, Owner: "o", HasACL: true, Comment: &comment, ACL: []archive.Grant{{Privilege: "SELECT"}}}}
			if !reflect.DeepEqual(m.LargeObjects, wantLO) {
				t.Errorf("large objects %+v", m.LargeObjects)
			}
			if !reflect.DeepEqual(sizes, map[uint32]int64{1: 40960, 2: 40960, 3: 8192}) {
				t.Errorf("sizes %v", sizes)
			}
			if len(m.Sequences) != 1 || m.Sequences[0] != (archive.Sequence{Schema: "s", Name: "seq", LastValue: 7, IsCalled: true}) ||
				len(m.Matviews) != 1 || m.Matviews[0] != (archive.QualifiedRel{Schema: "s", Name: "mv"}) ||
				len(m.Schemas) != 1 || m.Schemas[0] != (archive.Object{OID: 1, Name: "s"}) ||
				len(m.Relations) != 1 || m.Relations[0] != (archive.Object{OID: 100, Schema: "s", Name: "big", Kind: "r"}) {
				t.Errorf("sequences %+v, matviews %+v, schemas %+v, relations %+v", m.Sequences, m.Matviews, m.Schemas, m.Relations)
			}
			if p := planOf(m); p.Tables != 2 || p.Chunks != 4 || p.Bytes != 81920+8192 || p.Rows != 1000 || p.Op != "dump" {
				t.Errorf("plan %+v", p)
			}
		})
	}
}

// TestPlanAll checks that a whole-server dump's plan is its sessions'
// plans summed, as a dump of one database plans: estimated, the chunks'
// sizes (not the tables'), large objects included.
func TestPlanAll(t *testing.T) {
	a := &Session{Manifest: &archive.Manifest{
		Tables: []archive.Table{{Rows: 10, SizeBytes: 1 << 30}}, Chunks: []archive.Chunk{{Size: 100}, {Size: 50}},
		LargeObjects: []archive.LargeObject{{Size: 7}},
	}}
	b := &Session{Manifest: &archive.Manifest{Tables: []archive.Table{{Rows: 5, SizeBytes: 1 << 30}}, Chunks: []archive.Chunk{{Size: 20}}}}
	want := progress.Expected{Op: "dump", Tables: 2, Chunks: 4, Bytes: 177, Rows: 15, Estimated: true}
	if got := PlanAll([]*Session{a, b}); got != want {
		t.Errorf("PlanAll = %+v, want %+v", got, want)
	}
	if got, one := PlanAll([]*Session{a}), a.Plan(); got != one {
		t.Errorf("PlanAll of one session %+v, its Plan %+v", got, one)
	}
}

// TestPlanUnits checks the dump's work order: largest first, ties in
// manifest order, large objects in batches of loBatch whose size is their
// sum, and runs of small whole tables in one unit (batchSmallTables).
func TestPlanUnits(t *testing.T) {
	m := &archive.Manifest{Chunks: []archive.Chunk{{Stream: 1}, {Stream: 2}, {Stream: 3}, {Stream: 4}}}
	for i := 0; i < loBatch+3; i++ {
		m.LargeObjects = append(m.LargeObjects, archive.LargeObject{Stream: uint32(5 + i), OID: uint32(9000 + i), Size: 10})
	}
	sizes := map[uint32]int64{1: 500, 2: 3 << 20, 3: 500, 4: 100}
	us := planUnits(m, sizes)
	var got []string
	for _, u := range us {
		switch {
		case u.chunk != nil:
			got = append(got, "chunk "+string(rune('0'+u.chunk.Stream)))
		case u.tables != nil:
			name := "tables "
			for _, c := range u.tables {
				name += string(rune('0' + c.Stream))
			}
			got = append(got, name)
		default:
			got = append(got, "los "+string(rune('0'+len(u.los)%10)))
		}
	}
	// LO batches: 256 objects of 10 bytes (2560), then 3 (30); the small
	// tables between them locked together.
	want := []string{"chunk 2", "los 6", "tables 134", "los 3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	if len(us) != len(want) {
		t.FailNow()
	}
	if us[1].size != 10*loBatch || len(us[1].los) != loBatch || us[1].los[0].OID != 9000 || us[3].los[2].OID != uint32(9000+loBatch+2) {
		t.Errorf("first batch: %d objects, size %d", len(us[1].los), us[1].size)
	}
	if us[2].size != 1100 {
		t.Errorf("small tables' unit: size %d, want 1100", us[2].size)
	}
}

// TestCopyOutSQL checks the statement that reads a chunk: quoted names and
// columns, a range through a subquery of the table ONLY (not its
// children, which are read on their own), the archive's encoding for text and
// binary format for clone's binary chunks.
func TestCopyOutSQL(t *testing.T) {
	tab := archive.Table{Schema: "My Schema", Name: `t"x`, Columns: []string{"id", "Note"}}
	for _, tc := range []struct {
		name  string
		chunk archive.Chunk
		enc   string
		want  string
	}{
		{"whole table", archive.Chunk{}, "UTF8",
			`COPY "My Schema"."t""x" ("id", "Note") TO STDOUT WITH (ENCODING 'UTF8')`},
		{"no encoding", archive.Chunk{}, "",
			`COPY "My Schema"."t""x" ("id", "Note") TO STDOUT`},
		{"binary ignores encoding", archive.Chunk{Binary: true}, "LATIN1",
			`COPY "My Schema"."t""x" ("id", "Note") TO STDOUT WITH (FORMAT binary)`},
		{"range", archive.Chunk{Where: "ctid < '(5,0)'"}, "SQL_ASCII",
			`COPY (SELECT "id", "Note" FROM ONLY "My Schema"."t""x" WHERE ctid < '(5,0)') TO STDOUT WITH (ENCODING 'SQL_ASCII')`},
	} {
		if got := CopyOutSQL(tab, tc.chunk, tc.enc); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestSchemaArgs checks what pg_dump is asked for: statistics with the
// schema from pg_dump 18 on, unless turned off or the dump is schema- or
// data-only.
func TestSchemaArgs(t *testing.T) {
	for _, tc := range []struct {
		major  int
		noStat bool
		f      filter.Options
		want   []string
	}{
		{17, false, filter.Options{}, []string{"--schema-only"}},
		{18, false, filter.Options{}, []string{"--no-data", "--statistics"}},
		{18, true, filter.Options{}, []string{"--schema-only"}},
		{18, false, filter.Options{Selection: filter.Selection{SchemaOnly: true}}, []string{"--schema-only"}},
		{18, false, filter.Options{Selection: filter.Selection{DataOnly: true}}, []string{"--schema-only"}},
	} {
		s := &Session{tools: pgbin.Tools{Major: tc.major}, noStat: tc.noStat, filter: tc.f}
		if got := s.schemaArgs(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("pg_dump %d, no statistics %v, %+v: %q, want %q", tc.major, tc.noStat, tc.f, got, tc.want)
		}
	}
}

// TestPgDumpLocks checks which tables a pg_dump lock timeout is blamed
// on: tables and partitioned tables of the manifest's relations, or the
// tables read when a saved plan records no relations.
func TestPgDumpLocks(t *testing.T) {
	s := &Session{Manifest: &archive.Manifest{
		Relations: []archive.Object{{Schema: "s", Name: "t", Kind: "r"}, {Schema: "s", Name: "p", Kind: "p"}, {Schema: "s", Name: "v", Kind: "v"}, {Schema: "s", Name: "q", Kind: "S"}},
		Tables:    []archive.Table{{Schema: "s", Name: "t"}},
	}}
	if got, want := s.pgDumpLocks(), []string{`"s"."t"`, `"s"."p"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("with relations: %q, want %q", got, want)
	}
	s.Manifest.Relations = nil
	if got, want := s.pgDumpLocks(), []string{`"s"."t"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("without relations: %q, want %q", got, want)
	}
}

// TestReuse checks that a saved plan is taken only in the snapshot it was
// made in, with its chunks' estimates as the work's sizes.
func TestReuse(t *testing.T) {
	saved := &archive.Manifest{Snapshot: "snap-a", Chunks: []archive.Chunk{{Stream: 1, Size: 10}, {Stream: 2, Size: 20}}}
	s := &Session{snap: &pg.Snapshot{ID: "snap-b"}}
	if err := s.reuse(saved, discard()); err == nil || !strings.Contains(err.Error(), "made in snapshot snap-a, not snap-b") {
		t.Errorf("reuse in another snapshot: %v", err)
	}
	if s.Manifest != nil {
		t.Error("a refused plan became the session's manifest")
	}
	s.snap.ID = "snap-a"
	if err := s.reuse(saved, discard()); err != nil {
		t.Fatal(err)
	}
	if s.Manifest != saved || s.sizes[2] != 20 || s.sizes[1] != 10 || s.sizes[9] != 0 {
		t.Errorf("reused: manifest %p (want %p), sizes %v", s.Manifest, saved, s.sizes)
	}
}

// TestLockFailed checks how a reader explains a failed lock statement
// that is not a lock conflict: the table gone, the snapshot gone, or
// anything else, with the table named.
func TestLockFailed(t *testing.T) {
	r := &Reader{snap: "0000-1", inTx: true, held: map[string]bool{`"s"."t"`: true}}
	for _, tc := range []struct {
		err     error
		changed string // ChangedError.What, or "" for another error
		is      error
		text    string
	}{
		{&pgconn.PgError{Code: "42P01", Message: `relation "s.t" does not exist`}, "dropped or renamed", nil, ""},
		{&pgconn.PgError{Code: "22023", Message: "invalid snapshot identifier"}, "", pg.ErrSnapshotNotFound, "import snapshot 0000-1: "},
		{&pgconn.PgError{Code: "XX000", Message: "internal"}, "", nil, `lock table "s"."x": `},
		{errors.New("unexpected EOF"), "", nil, `lock table "s"."x": `},
	} {
		err := r.lockFailed(context.Background(), []string{`"s"."x"`}, tc.err)
		var changed *ChangedError
		switch {
		case tc.changed != "":
			if !errors.As(err, &changed) || changed.What != tc.changed || changed.Table != `"s"."x"` {
				t.Errorf("%v: %v, want a ChangedError %q", tc.err, err, tc.changed)
			}
		case tc.is != nil && !errors.Is(err, tc.is), !strings.HasPrefix(err.Error(), tc.text), errors.As(err, &changed):
			t.Errorf("%v: %v, want %q... (errors.Is %v)", tc.err, err, tc.text, tc.is)
		}
	}
}

// TestChangedError checks the one-line message of a table changed under
// the snapshot.
func TestChangedError(t *testing.T) {
	err := error(&ChangedError{Table: `"s"."t"`, What: "truncated or rewritten"})
	want := `table "s"."t" was truncated or rewritten by another session after the snapshot was taken, before its rows were read: stopped rather than copy wrong rows; run again`
	if err.Error() != want || strings.Contains(err.Error(), "\n") {
		t.Errorf("%s\nwant %s", err, want)
	}
}

// TestBulkReadConfig checks that the bulk-read configuration is a copy:
// the caller's configuration keeps pgx's default frontend.
func TestBulkReadConfig(t *testing.T) {
	cfg, err := pgx.ParseConfig("host=/tmp dbname=x")
	if err != nil {
		t.Fatal(err)
	}
	fn := func(f any) uintptr { return reflect.ValueOf(f).Pointer() }
	before := fn(cfg.BuildFrontend)
	bulk := BulkReadConfig(cfg)
	if bulk == cfg || bulk.BuildFrontend == nil || fn(bulk.BuildFrontend) == before || fn(cfg.BuildFrontend) != before || bulk.Database != "x" {
		t.Errorf("BulkReadConfig: not a copy with its own frontend (same config %v, db %q)", bulk == cfg, bulk.Database)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
