package archive

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/heaptest"
)

// smallTablesManifest is the manifest of a dump of n small tables shaped
// like pgtest.SmallTables: one chunk and one relation entry a table, the
// same four columns in each, all in schema public.
func smallTablesManifest(n int) *Manifest {
	m := &Manifest{
		FormatVersion: 1, ToolVersion: "test", ServerVersion: "17.2", ServerVersionNum: 170002,
		Database: "db", Encoding: "UTF8", Codec: "none", SnapshotTime: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
		SchemaStream: 1, Schemas: []Object{{OID: 2200, Name: "public"}},
	}
	for i := range n {
		name := fmt.Sprintf("small_%06d", i+1)
		oid := uint32(20000 + 2*i)
		m.Tables = append(m.Tables, Table{OID: oid, Filenode: oid, Schema: "public", Name: name,
			Columns: []string{"id", "ref", "label", "created"}, Pages: 1, SizeBytes: 8192, Rows: 10})
		m.Chunks = append(m.Chunks, Chunk{Stream: uint32(i + 2), Table: i, Size: 300})
		m.Relations = append(m.Relations, Object{OID: oid, Schema: "public", Name: name, Kind: "r"})
	}
	return m
}

// TestManifestMemory bounds the live heap a decoded manifest of many small
// tables holds per table: a restore keeps it for the whole run, beside
// the task graph and the archive's index. As encoding/json leaves it,
// each table has its own copy of the same column names and schema, and
// every slice up to a quarter of spare capacity: 343 bytes a table. With
// those shared and trimmed (compactManifest), 208: the table, its chunk
// and its relation entry, and its name.
func TestManifestMemory(t *testing.T) {
	const n = 100_000
	for _, tt := range []struct {
		name   string
		server bool
		max    uint64 // bytes per table
	}{
		{"database", false, 230},
		{"server", true, 230},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := smallTablesManifest(n)
			if tt.server {
				half := *m
				half.Tables, half.Chunks, half.Relations = m.Tables[:n/2], m.Chunks[:n/2], m.Relations[:n/2]
				rest := *m
				rest.Tables, rest.Chunks, rest.Relations = m.Tables[n/2:], m.Chunks[n/2:], m.Relations[n/2:]
				m = &Manifest{FormatVersion: formatCluster, ToolVersion: "test", Codec: "none",
					Databases: []Database{{Name: "a", Manifest: &half}, {Name: "b", Manifest: &rest}},
					Globals:   &Globals{Stream: 1}}
			}
			b, _, err := MarshalManifest(m)
			if err != nil {
				t.Fatal(err)
			}
			m = nil
			per := heldBy(t, n, func() (any, error) { return UnmarshalManifest(b) })
			runtime.KeepAlive(b)
			t.Logf("%d bytes per table", per)
			if per > tt.max {
				t.Errorf("the decoded manifest holds %d bytes per small table, want at most %d", per, tt.max)
			}
		})
	}
}

// TestReaderIndexMemory bounds the live heap an open Reader's index holds
// per stream, for an archive of many one-frame streams (small tables),
// which a restore keeps for its whole run: 167 bytes a stream with the
// footer's entries as decoded, a map of stream ids and a slice of frame
// indexes per stream; 72 as index.go keeps it.
func TestReaderIndexMemory(t *testing.T) {
	const n = 100_000
	w, out := newTestWriter(t, &Manifest{ToolVersion: "test", Database: "db", Encoding: "UTF8"})
	row := []byte("1\t1\tc4ca4238a0b923820dcc509a6f75849b\t2024-01-01 01:00:00+00\n")
	for i := range n {
		s := w.Stream(KindData, uint32(i+2))
		if err := s.WriteBlock(row, 1); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := out.Bytes()
	per := heldBy(t, n, func() (any, error) { return Open(bytes.NewReader(data), int64(len(data))) })
	runtime.KeepAlive(data)
	t.Logf("%d bytes per stream", per)
	if per > 90 {
		t.Errorf("an open Reader holds %d bytes per stream, want at most 90", per)
	}
}

// newTestWriter starts an uncompressed archive of m in memory.
func newTestWriter(t testing.TB, m *Manifest) (*Writer, *bytes.Buffer) {
	t.Helper()
	out := &bytes.Buffer{}
	w, err := NewWriter(out, m, mustCodec(t, "none", 0))
	if err != nil {
		t.Fatal(err)
	}
	return w, out
}

// heldBy is the live heap that what build returns holds, per each of its n
// items. The caller keeps build's inputs alive until it returns.
func heldBy(t *testing.T, n int, build func() (any, error)) uint64 {
	t.Helper()
	before := heaptest.Live()
	v, err := build()
	if err != nil {
		t.Fatal(err)
	}
	per := (heaptest.Live() - before) / uint64(n)
	runtime.KeepAlive(v)
	return per
}

// TestUnmarshalManifestShares: a decoded manifest equals what was
// encoded, null and empty lists apart, raw names and a whole server's
// databases included, while equal column lists are one list and long
// slices have no spare capacity.
func TestUnmarshalManifestShares(t *testing.T) {
	db := smallTablesManifest(300)
	db.Tables[1].Columns = []string{"id", "other"}
	db.Tables[2].Columns = []string{}
	db.Tables[3].Columns = nil
	db.Tables[4].Schema, db.Tables[4].Columns = "caf\xe9", []string{"id\xe9", "ref", "label", "created"}
	db.Sequences = []Sequence{{Schema: "public", Name: "s"}}
	db.Matviews = []QualifiedRel{{Schema: "public", Name: "v"}}
	db.LargeObjects = []LargeObject{{Stream: 9999, OID: 5, Owner: "o", ACL: []Grant{{Grantee: "g", Privilege: "SELECT"}}}}
	other := smallTablesManifest(10)
	server := &Manifest{FormatVersion: formatCluster, Codec: "none", Globals: &Globals{Stream: 1},
		Databases: []Database{{Name: "a", Manifest: db}, {Name: "b", Manifest: other}}}
	for _, m := range []*Manifest{db, server} {
		b, version, err := MarshalManifest(m)
		if err != nil {
			t.Fatal(err)
		}
		m.FormatVersion = version
		got, err := UnmarshalManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("decoded manifest differs from the encoded one")
		}
		if m.IsCluster() {
			if &got.Databases[0].Manifest.Tables[0].Columns[0] != &got.Databases[1].Manifest.Tables[0].Columns[0] {
				t.Errorf("two databases' equal column lists are not shared")
			}
			got = got.Databases[0].Manifest
		}
		tables := got.Tables
		if &tables[0].Columns[0] != &tables[10].Columns[0] || &tables[0].Columns[0] == &tables[1].Columns[0] {
			t.Errorf("equal column lists are not shared, or different ones are")
		}
		if tables[2].Columns == nil || tables[3].Columns != nil {
			t.Errorf("empty and null column lists were not kept apart")
		}
		if cap(tables) != len(tables) || cap(got.Chunks) != len(got.Chunks) || cap(got.Relations) != len(got.Relations) {
			t.Errorf("slices kept spare capacity: tables %d/%d, chunks %d/%d, relations %d/%d",
				len(tables), cap(tables), len(got.Chunks), cap(got.Chunks), len(got.Relations), cap(got.Relations))
		}
	}
}
