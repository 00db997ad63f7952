package archive

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FormatVersion is the newest archive format this package reads and
// writes. Readers refuse archives with a higher version, because a newer
// writer may have added frame kinds or header fields they would misread.
// The writer writes the lowest version that can hold what the archive
// uses: 1, or 2 when the manifest holds strings invalid in UTF8 (a
// SQL_ASCII source's names, stored marked: see MarshalManifest), 3 when
// the archive is encrypted (sealed.go), or 4 for a whole-server archive
// (Databases, encrypted or not), which an older reader must refuse rather
// than restore as an empty database.
const FormatVersion = formatPacked

// Manifest is written in the header, before any frame, so that a reader of a
// stream knows every table, chunk and large object it is about to see
// without waiting for the footer.
type Manifest struct {
	FormatVersion    int       `json:"format_version"`
	ToolVersion      string    `json:"tool_version"`
	ServerVersion    string    `json:"server_version"`     // e.g. "15.18"
	ServerVersionNum int       `json:"server_version_num"` // e.g. 150018
	PgDumpVersion    string    `json:"pg_dump_version"`    // the pg_dump that wrote the schema stream
	Database         string    `json:"database"`
	Encoding         string    `json:"encoding"` // server_encoding of the source; COPY data is in it
	Snapshot         string    `json:"snapshot"` // exported snapshot id every reader used
	SnapshotTime     time.Time `json:"snapshot_time"`
	Codec            string    `json:"codec"` // name of the codec of every frame
	Level            int       `json:"level"`
	// LevelAuto is set when no one level wrote the frames: zstd auto
	// chose each frame's level in this range from what the dump waited on
	// (Level is then 0). Decoding needs no level either way.
	LevelAuto     *LevelRange `json:"level_auto,omitempty"`
	BlockSize     int         `json:"block_size"`     // target raw size of a data block
	MaxInterleave int         `json:"max_interleave"` // most streams written at once (dump workers)

	// SchemaStream is the stream that holds pg_dump's custom-format archive.
	SchemaStream uint32         `json:"schema_stream"`
	Tables       []Table        `json:"tables"`
	Chunks       []Chunk        `json:"chunks"`
	Sequences    []Sequence     `json:"sequences"`
	LargeObjects []LargeObject  `json:"large_objects"`
	Matviews     []QualifiedRel `json:"matviews"` // populated materialized views, to refresh after restore

	// DataOnly marks an archive dumped with --data-only: its schema stream
	// is there for listing and selection, but restoring it loads data
	// into existing tables and creates nothing, as pg_restore does with
	// pg_dump --data-only's output.
	DataOnly bool `json:"data_only,omitempty"`
	// StatisticsWithoutData marks an archive dumped with --no-data or
	// --statistics-only: its optimizer statistics come without rows, and
	// every table's is restored (onto empty tables, as pg_restore does),
	// not only those of the tables whose rows are loaded.
	StatisticsWithoutData bool `json:"statistics_without_data,omitempty"`
	// Schemas and Relations name, with their source OIDs, the schemas and
	// relations (tables, views, sequences, ...) the schema stream defines.
	// pg_dump's table of contents carries each object's OID but only a
	// display form of its name, so restore's -n/-t patterns are matched
	// here, on exact names, and mapped to entries by OID.
	Schemas   []Object `json:"schemas,omitempty"`
	Relations []Object `json:"relations,omitempty"`

	// CopyEncoding is the encoding of the COPY text in data streams: the
	// source's server encoding, read without conversion (Encoding says
	// the same, but archives written before CopyEncoding existed hold
	// UTF8 text: see DataEncoding). Names are UTF8, or marked raw bytes
	// for a SQL_ASCII source (MarshalManifest).
	CopyEncoding string `json:"copy_encoding,omitempty"`

	// Databases makes the archive a whole server's (dump --all, format
	// version 4): each database has its own manifest, as a one-database
	// archive's, whose stream ids are unique in the whole archive. The
	// top-level Tables, Chunks, ... are then empty and SchemaStream means
	// nothing: Globals holds the server's roles and tablespaces.
	Databases []Database `json:"databases,omitempty"`
	Globals   *Globals   `json:"globals,omitempty"`

	// Subset marks a development copy (dump or clone --subset): the
	// tables hold the rows the rules chose and every row they reference,
	// not the whole source. list shows it; restore records it in the
	// target (the database setting pg.SubsetSetting), so that compare
	// against the source says so instead of reporting every table as
	// different.
	Subset *Subset `json:"subset,omitempty"`

	// Mask marks a masked development copy (dump or clone --mask): the
	// columns listed hold masked values, never the secret that keyed
	// them. list shows it; restore records it in the target (the
	// database setting pg.MaskSetting), so that compare against the
	// source says so instead of reporting the masked tables as different.
	Mask *Mask `json:"mask,omitempty"`
}

// Mask is every masked column of an archive and its rule, as given
// (partitions and inheritance children listed with their parent's rule).
type Mask struct {
	Columns []MaskColumn `json:"columns"`
}

// MaskColumn is one masked column and the rule that masked it.
type MaskColumn struct {
	Schema string `json:"schema"`
	Table  string `json:"table"`
	Column string `json:"column"`
	Rule   string `json:"rule"`
}

// Describe is the masking in one line, for list and compare.
func (m *Mask) Describe() string {
	tables := map[string]bool{}
	var parts []string
	for _, c := range m.Columns {
		tables[c.Schema+"\x00"+c.Table] = true
		if len(parts) < 8 {
			parts = append(parts, quoteIdent(c.Schema)+"."+quoteIdent(c.Table)+"."+quoteIdent(c.Column)+"="+c.Rule)
		}
	}
	if len(m.Columns) > len(parts) {
		parts = append(parts, fmt.Sprintf("and %d more", len(m.Columns)-len(parts)))
	}
	return fmt.Sprintf("masked development copy: %d columns of %d tables (%s)", len(m.Columns), len(tables), strings.Join(parts, ", "))
}

// Subset is how a subset archive was chosen, as the user gave it, and what
// each table kept: enough to say what the archive is without the source.
type Subset struct {
	Seeds    []SubsetSeed  `json:"seeds"`
	Children bool          `json:"children,omitempty"` // --subset-children
	Others   string        `json:"others"`             // "all" or "none"
	Refs     []string      `json:"refs,omitempty"`     // virtual references, as given
	Tables   []SubsetTable `json:"tables,omitempty"`   // every table whose rows were chosen (not kept whole)
}

// Describe is the subset's rules in one line, for list, the target's
// setting and compare.
func (s *Subset) Describe() string {
	var parts []string
	for _, seed := range s.Seeds {
		parts = append(parts, seed.Table+": "+seed.Where)
	}
	out := "subset of " + strings.Join(parts, "; ")
	if s.Children {
		out += ", with children"
	}
	out += ", other tables: " + s.Others
	if len(s.Refs) > 0 {
		out += ", virtual references: " + strings.Join(s.Refs, "; ")
	}
	return out
}

// SubsetSeed is one --subset rule: a table and the condition its rows
// matched.
type SubsetSeed struct {
	Table string `json:"table"` // as given
	Where string `json:"where"`
}

// SubsetTable is a table whose rows the subset chose: Rows of them, or
// none at all when Empty (an other table under --subset-others none).
type SubsetTable struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	Empty  bool   `json:"empty,omitempty"`
}

// Database is one database of a whole-server archive.
type Database struct {
	Name string `json:"name"`
	// SizeBytes is pg_database_size when dumped, for list.
	SizeBytes int64 `json:"size_bytes"`
	// Owner is the database's owner when dumped: restore --all --clean
	// checks that it can create the database under that owner again
	// before it drops anything ("" in archives written before it was).
	Owner string `json:"owner,omitempty"`
	// Manifest describes the database's streams exactly as a
	// one-database archive's manifest does (its format_version and codec
	// are the archive's); its schema stream is pg_dump's, whose DATABASE
	// entries carry the owner, encoding, locale, ACL and settings.
	Manifest *Manifest `json:"manifest"`
}

// Globals is the server-wide part of a whole-server archive.
type Globals struct {
	// Stream holds the SQL of pg_dumpall --globals-only (roles, role
	// settings, memberships, tablespaces), a stream of kind Schema.
	Stream uint32 `json:"stream"`
	// NoRolePasswords says the dump could not read pg_authid, so the
	// roles were dumped without passwords (pg_dumpall --no-role-passwords).
	NoRolePasswords bool `json:"no_role_passwords,omitempty"`
	// Skipped names the databases left out, and why (templates, those that
	// do not allow connections, --exclude-database).
	Skipped []SkippedDatabase `json:"skipped,omitempty"`
}

// SkippedDatabase is a database of the source a whole-server dump left out.
type SkippedDatabase struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// IsCluster says whether m is the manifest of a whole-cluster archive
// (--all: every database of a database cluster, and its globals).
func (m *Manifest) IsCluster() bool { return len(m.Databases) > 0 || m.Globals != nil }

// DatabaseManifest is the manifest of database name in a whole-server
// archive, completed with the archive-wide fields it shares (format
// version, codec), or nil.
func (m *Manifest) DatabaseManifest(name string) *Manifest {
	for _, d := range m.Databases {
		if d.Name == name && d.Manifest != nil {
			sub := *d.Manifest
			sub.FormatVersion, sub.Codec, sub.Level, sub.LevelAuto = m.FormatVersion, m.Codec, m.Level, m.LevelAuto
			return &sub
		}
	}
	return nil
}

// DataEncoding is the encoding of the archive's COPY text. Archives
// written before CopyEncoding existed hold text in their dump connection's
// client_encoding, which restores read as UTF8 (SQL_ASCII as stored): so
// they still are, rather than guessing, which could silently garble text.
func (m *Manifest) DataEncoding() string {
	switch {
	case m.CopyEncoding != "":
		return m.CopyEncoding
	case m.Encoding == "SQL_ASCII":
		return "SQL_ASCII"
	}
	return "UTF8"
}

// Object is a schema or relation of the source and its OID there. Schema
// is empty for a schema; Kind is pg_class.relkind for a relation.
type Object struct {
	OID    uint32 `json:"oid"`
	Schema string `json:"schema,omitempty"`
	Name   string `json:"name"`
	Kind   string `json:"kind,omitempty"`
}

// QualifiedRel names a relation by schema and name, both unquoted.
type QualifiedRel struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
}

// Table is one relation whose rows are carried as COPY text.
type Table struct {
	// OID and Filenode are the table's OID and pg_class.relfilenode in
	// the snapshot: before its COPY, a reader checks that the name still
	// resolves to the OID and that the table's current filenode is the
	// same (it changes when the table is truncated or rewritten). Zero in
	// archives (and clone journals) written before they existed.
	OID       uint32   `json:"oid,omitempty"`
	Filenode  uint32   `json:"filenode,omitempty"`
	Schema    string   `json:"schema"`
	Name      string   `json:"name"`
	Columns   []string `json:"columns"`    // unquoted, in COPY order (generated columns excluded)
	Pages     int64    `json:"pages"`      // relpages when dumped (an estimate)
	SizeBytes int64    `json:"size_bytes"` // pg_relation_size when dumped
	Rows      int64    `json:"est_rows"`   // reltuples when dumped (an estimate)
}

// Chunk is one unit of table data: a table, or a range of it, written as its
// own stream so that chunks can be loaded in parallel.
type Chunk struct {
	Stream uint32 `json:"stream"`
	Table  int    `json:"table"`           // index into Manifest.Tables
	Where  string `json:"where,omitempty"` // SQL predicate selecting the range; empty for the whole table
	// Size is the planner's estimate of the chunk's bytes, by which the
	// dump orders its work. A reader of a pipe, which learns real sizes
	// only at each stream's end, schedules by it too, so that its loads
	// ask for streams in the order the dump writes them. Zero if unknown
	// (archives written before it existed).
	Size int64 `json:"size,omitempty"`
	// Binary chunks travel in COPY's binary format, which costs both
	// servers less CPU than text. Only clone uses it, between servers of
	// one major version and for tables whose column types are all
	// built-in (their binary forms, and the type OIDs arrays carry, are
	// the same on both sides); archives are always text.
	Binary bool `json:"binary,omitempty"`
	// Keep, for a table of a subset, is the predicate that picks the
	// chunk's kept rows by their row ids in the snapshot (internal/subset),
	// ANDed with Where. It can be megabytes, so it is never recorded: it
	// lives in the session that reads the chunk, dump or clone, and means
	// nothing outside its snapshot.
	Keep string `json:"-"`
}

// CopyFormat names the COPY format of m's table data, which is what a
// run's "raw" bytes count: "text", "binary", "text and binary" (a clone
// whose tables differ), or "" without chunks. The same rows take more or
// fewer bytes in each, so a summary names it beside the number.
func (m *Manifest) CopyFormat() string {
	var text, binary bool
	for _, c := range m.Chunks {
		text, binary = text || !c.Binary, binary || c.Binary
	}
	return JoinCopyFormats(map[bool]string{true: "text"}[text], map[bool]string{true: "binary"}[binary])
}

// JoinCopyFormats is the COPY format of data in the given formats (as
// CopyFormat names them; "" for none): a whole-server run's, from its
// databases'.
func JoinCopyFormats(formats ...string) string {
	var found []string
	for _, name := range []string{"text", "binary"} {
		if slices.ContainsFunc(formats, func(f string) bool { return strings.Contains(f, name) }) {
			found = append(found, name)
		}
	}
	return strings.Join(found, " and ")
}

// Sequence carries a sequence's state as read inside the snapshot.
type Sequence struct {
	Schema    string `json:"schema"`
	Name      string `json:"name"`
	LastValue int64  `json:"last_value"`
	IsCalled  bool   `json:"is_called"`
}

// LargeObject carries a large object's metadata; its bytes are the stream's.
// pg_dump --schema-only leaves large objects out entirely, so pgsprint owns
// their owner, privileges and comment too.
type LargeObject struct {
	Stream  uint32  `json:"stream"`
	OID     uint32  `json:"oid"`
	Owner   string  `json:"owner"`
	ACL     []Grant `json:"acl,omitempty"` // nil: default privileges
	HasACL  bool    `json:"has_acl"`       // false: lomacl was NULL (owner-only default)
	Comment *string `json:"comment,omitempty"`
	Size    int64   `json:"size"`
}

// Grant is one exploded aclitem of a large object.
type Grant struct {
	Grantee   string `json:"grantee"` // empty for PUBLIC
	Privilege string `json:"privilege"`
	Grantable bool   `json:"grantable"`
}

// quoteIdent quotes an identifier as SQL does (pg.Ident, which this
// package cannot import).
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// LevelRange is the lowest and highest level an adaptive codec could
// choose (Manifest.LevelAuto).
type LevelRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// CodecText is how listings name the archive's compression: "zstd level
// 1", or "zstd auto (levels 1..9)" when the dump chose each frame's level.
func (m *Manifest) CodecText() string {
	if r := m.LevelAuto; r != nil {
		return fmt.Sprintf("%s auto (levels %d..%d)", m.Codec, r.Min, r.Max)
	}
	return fmt.Sprintf("%s level %d", m.Codec, m.Level)
}
