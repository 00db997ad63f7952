package archive

import (
	"fmt"
	"io"
	"os"
	"sort"

	"filippo.io/age"
)

// File is an archive opened from a path, for commands that read one.
type File struct {
	*Reader
	f *os.File
}

// OpenFile opens and checks the archive at path (header, trailer, footer),
// with ids for an encrypted one (see Open).
func OpenFile(path string, ids ...age.Identity) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open archive: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open archive: %w", err)
	}
	r, err := Open(f, st.Size(), ids...)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open archive %s: %w", path, err)
	}
	return &File{Reader: r, f: f}, nil
}

// Close closes the underlying file.
func (f *File) Close() error { return f.f.Close() }

// TableSummary is what an archive holds of one table, summed over its
// chunks, as `pgsprint list` shows it.
type TableSummary struct {
	Schema      string `json:"schema"`
	Name        string `json:"name"`
	Chunks      int    `json:"chunks"`
	Rows        int64  `json:"rows"`
	RawBytes    int64  `json:"raw_bytes"`
	StoredBytes int64  `json:"stored_bytes"`
}

// Tables sums the footer's stream totals per table, in manifest order.
func (r *Reader) Tables() []TableSummary { return tablesOf(r.Manifest(), r.Stream) }

// ReadTables reads a whole archive from a pipe and sums its streams' End
// totals per table: the manifest comes first, but the totals only with
// each stream's end, so `pgsprint list -` must read everything. Every
// frame is checked on the way, so an incomplete archive is an error.
func ReadTables(r io.Reader, ids ...age.Identity) (*Manifest, []TableSummary, error) {
	m, tables, _, err := ReadListing(r, ids...)
	return m, tables, err
}

// DataTotals sums the raw and stored bytes of the streams that hold data,
// table chunks and large objects, leaving out the schema (pg_dump's own
// archive): one number for "how much data" whichever command reports it.
func DataTotals(streams []StreamInfo) (raw, stored int64) {
	for _, s := range streams {
		if s.Kind == KindData || s.Kind == KindLargeObject {
			raw, stored = raw+s.RawBytes, stored+s.StoredBytes
		}
	}
	return raw, stored
}

// ReadListing is ReadTables that also returns every stream's totals.
func ReadListing(r io.Reader, ids ...age.Identity) (*Manifest, []TableSummary, []StreamInfo, error) {
	s, err := NewSequential(r, ids...)
	if err != nil {
		return nil, nil, nil, err
	}
	totals := map[uint32]*StreamInfo{}
	for {
		f, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, nil, err
		}
		if f.End {
			t := f.Totals
			totals[f.Stream] = &t
		}
	}
	m := s.Manifest()
	infos := make([]StreamInfo, 0, len(totals))
	for _, t := range totals {
		infos = append(infos, *t)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
	return m, tablesOf(m, func(id uint32) (*StreamInfo, bool) { t, ok := totals[id]; return t, ok }), infos, nil
}

func tablesOf(m *Manifest, stream func(uint32) (*StreamInfo, bool)) []TableSummary {
	out := make([]TableSummary, len(m.Tables))
	for i, t := range m.Tables {
		out[i] = TableSummary{Schema: t.Schema, Name: t.Name}
	}
	for _, c := range m.Chunks {
		if c.Table < 0 || c.Table >= len(out) {
			continue
		}
		s := &out[c.Table]
		s.Chunks++
		if info, ok := stream(c.Stream); ok {
			s.Rows += info.Rows
			s.RawBytes += info.RawBytes
			s.StoredBytes += info.StoredBytes
		}
	}
	return out
}

// Source is what a restore reads: the seekable Reader, or the Demux over a
// pipe. Stream totals of a Demux are known only once the stream's End
// frame has been read, so planning must fall back to the manifest's
// estimates when Stream reports false.
type Source interface {
	Manifest() *Manifest
	OpenStream(id uint32) io.ReadCloser
	Stream(id uint32) (*StreamInfo, bool)
}

var (
	_ Source = (*Reader)(nil)
	_ Source = (*Demux)(nil)
)
