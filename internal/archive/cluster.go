package archive

import (
	"fmt"
	"io"
)

// DatabaseSource is the view of one database of a whole-cluster archive
// that the restore engine reads: its own manifest, and the archive's
// streams (whose ids are unique archive-wide).
type DatabaseSource struct {
	Source
	m *Manifest
}

// OpenDatabase returns the view of database name in src, a whole-cluster
// archive.
func OpenDatabase(src Source, name string) (*DatabaseSource, error) {
	m := src.Manifest()
	if !m.IsCluster() {
		return nil, fmt.Errorf("the archive holds one database (%q), not a whole server: restore it without --all/--database", m.Database)
	}
	sub := m.DatabaseManifest(name)
	if sub == nil {
		return nil, fmt.Errorf("the archive holds no database %q (it holds %s)", name, databaseNames(m))
	}
	return &DatabaseSource{Source: src, m: sub}, nil
}

// Manifest is the database's manifest.
func (d *DatabaseSource) Manifest() *Manifest { return d.m }

// Order is the archive's: a database's streams come as the archive's do.
func (d *DatabaseSource) Order() Order { return d.Source.Order() }

// OpenStream reads one of the archive's streams.
func (d *DatabaseSource) OpenStream(id uint32) io.ReadCloser { return d.Source.OpenStream(id) }

// databaseNames lists a server archive's databases for a message.
func databaseNames(m *Manifest) string {
	s := ""
	for i, d := range m.Databases {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%q", d.Name)
	}
	if s == "" {
		return "none"
	}
	return s
}

// DatabaseSummary is one database of a whole-cluster archive as list shows
// it: its tables' totals summed from the streams.
type DatabaseSummary struct {
	Name        string         `json:"name"`
	SizeBytes   int64          `json:"size_bytes"` // pg_database_size when dumped
	Encoding    string         `json:"encoding"`
	Snapshot    string         `json:"snapshot"`
	Tables      []TableSummary `json:"tables"`
	Chunks      int            `json:"chunks"`
	Rows        int64          `json:"rows"`
	RawBytes    int64          `json:"raw_bytes"`
	StoredBytes int64          `json:"stored_bytes"`
}

// DatabaseSummaries sums a whole-cluster archive's streams per database.
func DatabaseSummaries(m *Manifest, streams []StreamInfo) []DatabaseSummary {
	byID := make(map[uint32]*StreamInfo, len(streams))
	for i := range streams {
		byID[streams[i].ID] = &streams[i]
	}
	lookup := func(id uint32) (*StreamInfo, bool) { s, ok := byID[id]; return s, ok }
	var out []DatabaseSummary
	for _, d := range m.Databases {
		if d.Manifest == nil {
			continue
		}
		s := DatabaseSummary{Name: d.Name, SizeBytes: d.SizeBytes, Encoding: d.Manifest.Encoding, Snapshot: d.Manifest.Snapshot,
			Tables: tablesOf(d.Manifest, lookup), Chunks: len(d.Manifest.Chunks)}
		for _, t := range s.Tables {
			s.Rows, s.RawBytes, s.StoredBytes = s.Rows+t.Rows, s.RawBytes+t.RawBytes, s.StoredBytes+t.StoredBytes
		}
		out = append(out, s)
	}
	return out
}
