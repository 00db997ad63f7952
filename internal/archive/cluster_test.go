package archive

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestServerArchive writes a whole-server archive (globals and two
// databases whose streams are numbered archive-wide): it is version 4,
// verifies, and each database reads back through OpenDatabase as a
// one-database archive; a database whose stream is missing fails Verify.
func TestServerArchive(t *testing.T) {
	streams := []testStream{
		{id: 0, kind: KindSchema, data: []byte("CREATE ROLE alice;\n")},
		{id: 1, kind: KindSchema, data: []byte("schema of a")},
		{id: 2, kind: KindData, data: copyRows(1, 100), rows: 100},
		{id: 3, kind: KindSchema, data: []byte("schema of b")},
		{id: 4, kind: KindData, data: copyRows(2, 50), rows: 50},
	}
	db := func(name string, schema, chunk uint32) Database {
		return Database{Name: name, SizeBytes: 8192, Manifest: &Manifest{Database: name, Encoding: "UTF8", SchemaStream: schema,
			Tables: []Table{{Schema: "public", Name: "t"}}, Chunks: []Chunk{{Stream: chunk, Table: 0}}}}
	}
	m := &Manifest{ToolVersion: "test", Globals: &Globals{Stream: 0}, Databases: []Database{db("a", 1, 2), db("b", 3, 4)}}
	write := func(m *Manifest) []byte {
		var out bytes.Buffer
		w, err := NewWriter(&out, m, mustCodec(t, "zstd", 1))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range streams {
			if err := writeStream(w, s, 64); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	data := write(m)
	ar, err := Open(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if v := ar.Manifest().FormatVersion; v != formatPacked {
		t.Errorf("format version %d, want %d", v, formatPacked)
	}
	if err := ar.Verify(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		schema string
		rows   []byte
	}{{"a", "schema of a", streams[2].data}, {"b", "schema of b", streams[4].data}} {
		d, err := OpenDatabase(ar, tc.name)
		if err != nil {
			t.Fatal(err)
		}
		dm := d.Manifest()
		if dm.Database != tc.name || dm.Codec != "zstd" || dm.FormatVersion != formatPacked {
			t.Errorf("database %s: manifest %q codec %q version %d", tc.name, dm.Database, dm.Codec, dm.FormatVersion)
		}
		schema, _ := io.ReadAll(d.OpenStream(dm.SchemaStream))
		rows, _ := io.ReadAll(d.OpenStream(dm.Chunks[0].Stream))
		if string(schema) != tc.schema || !bytes.Equal(rows, tc.rows) {
			t.Errorf("database %s read back %q and %d bytes of rows", tc.name, schema, len(rows))
		}
	}
	if _, err := OpenDatabase(ar, "c"); err == nil || !strings.Contains(err.Error(), `holds no database "c" (it holds "a", "b")`) {
		t.Errorf("OpenDatabase of a missing database: %v", err)
	}

	// A manifest naming a stream the archive lacks fails Verify, naming
	// the database.
	bad := &Manifest{ToolVersion: "test", Globals: &Globals{Stream: 0}, Databases: []Database{db("a", 1, 2), db("b", 3, 9)}}
	data = write(bad)
	if ar, err = Open(bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if err := ar.Verify(t.Context(), 2); err == nil || !strings.Contains(err.Error(), `database "b": archive: manifest chunk 0 refers to stream 9`) {
		t.Errorf("Verify of a database whose chunk is missing: %v", err)
	}
	// A one-database archive is written in the same version, its
	// manifest without databases.
	one := writeArchive(t, mustCodec(t, "zstd", 1), standardStreams(1), 1024)
	if ar, err = Open(bytes.NewReader(one), int64(len(one))); err != nil || ar.Manifest().FormatVersion != formatPacked || ar.Manifest().IsCluster() {
		t.Errorf("one-database archive: version %d, %v", ar.Manifest().FormatVersion, err)
	}
}
