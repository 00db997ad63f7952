package archive

import (
	"encoding/binary"
	"slices"
)

// compactor shares what a decoded manifest repeats. A restore holds its
// manifest for the whole run, and encoding/json gives every table its own
// copy of the same schema name and column list, and every slice up to a
// quarter of spare capacity: 34 MB at 100,000 small tables of four
// columns, where one table's worth of names would do. The maps live only
// while one manifest is compacted.
type compactor struct {
	strs map[string]string
	cols map[string][]string // by the column list's key (columnsKey)
	key  []byte
}

// Compact makes the manifest share equal strings and column lists and
// trims its slices, as a decoded one is (compactManifest): for a manifest
// made from the catalog, which a clone holds for its whole run (40 MB at
// 100,000 small tables, half of it the same names again). The manifest
// must not be written to afterwards.
func (m *Manifest) Compact() { compactManifest(m) }

// compactManifest makes m share equal strings and column lists and trims
// its slices to their length, each database's of a whole-server archive
// too. What is shared must never be written to: nothing writes to a
// decoded manifest (Reader.Manifest says so), and column lists are only
// read or appended to copies.
func compactManifest(m *Manifest) {
	c := &compactor{strs: map[string]string{}, cols: map[string][]string{}}
	c.manifest(m)
}

func (c *compactor) manifest(m *Manifest) {
	m.Tables = trim(m.Tables)
	for i := range m.Tables {
		t := &m.Tables[i]
		c.qualified(&t.Schema, &t.Name)
		t.Columns = c.columns(t.Columns)
	}
	m.Chunks = trim(m.Chunks)
	m.Sequences = trim(m.Sequences)
	for i := range m.Sequences {
		c.qualified(&m.Sequences[i].Schema, &m.Sequences[i].Name)
	}
	m.LargeObjects = trim(m.LargeObjects)
	for i := range m.LargeObjects {
		lo := &m.LargeObjects[i]
		lo.Owner = c.str(lo.Owner)
		for j := range lo.ACL {
			g := &lo.ACL[j]
			g.Grantee, g.Privilege = c.str(g.Grantee), c.str(g.Privilege)
		}
	}
	m.Matviews = trim(m.Matviews)
	for i := range m.Matviews {
		c.qualified(&m.Matviews[i].Schema, &m.Matviews[i].Name)
	}
	m.Schemas, m.Relations = c.objects(m.Schemas), c.objects(m.Relations)
	for _, d := range m.Databases {
		if d.Manifest != nil {
			c.manifest(d.Manifest)
		}
	}
}

func (c *compactor) objects(objs []Object) []Object {
	objs = trim(objs)
	for i := range objs {
		o := &objs[i]
		c.qualified(&o.Schema, &o.Name)
		o.Kind = c.str(o.Kind)
	}
	return objs
}

// qualified shares a schema and a relation name.
func (c *compactor) qualified(schema, name *string) {
	*schema, *name = c.str(*schema), c.str(*name)
}

// str is the first equal string c has seen, or s.
func (c *compactor) str(s string) string {
	if s == "" {
		return ""
	}
	if shared, ok := c.strs[s]; ok {
		return shared
	}
	c.strs[s] = s
	return s
}

// columns is the first equal column list c has seen, or cols trimmed to
// its length with its names shared. An empty list is left as it is:
// null and [] stay apart.
func (c *compactor) columns(cols []string) []string {
	if len(cols) == 0 {
		return cols
	}
	c.key = c.key[:0]
	for _, s := range cols {
		// Length-prefixed, so that no two lists share a key whatever
		// bytes their names hold.
		c.key = binary.AppendUvarint(c.key, uint64(len(s)))
		c.key = append(c.key, s...)
	}
	if shared, ok := c.cols[string(c.key)]; ok {
		return shared
	}
	shared := make([]string, len(cols))
	for i, s := range cols {
		shared[i] = c.str(s)
	}
	c.cols[string(c.key)] = shared
	return shared
}

// trim returns s in an allocation of its length: encoding/json grows
// slices as append does, leaving up to a quarter of a long one unused.
func trim[S ~[]E, E any](s S) S {
	if len(s) == cap(s) {
		return s
	}
	return slices.Clone(s)
}
