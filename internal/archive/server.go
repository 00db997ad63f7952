package archive

import (
	"fmt"
	"io"
)

// DatabaseSource is the view of one database of a whole-server archive
// that the restore engine reads: its own manifest, and the archive's
// streams (whose ids are unique archive-wide).
type DatabaseSource struct {
	Source
	m *Manifest
}

// OpenDatabase returns the view of database name in src, a whole-server
// archive.
func OpenDatabase(src Source, name string) (*DatabaseSource, error) {
	m := src.Manifest()
	if !m.IsServer() {
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
