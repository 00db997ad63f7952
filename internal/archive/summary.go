package archive

import (
	"context"
	"fmt"
)

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

// Totals sums the raw bytes and rows of m's data streams, table chunks
// and large objects, as src knows them now (a Demux only those it has read
// to their end): what a restore of m will move.
func Totals(src Source, m *Manifest) (raw, rows int64) {
	for _, c := range m.Chunks {
		if info, ok := src.Stream(c.Stream); ok {
			raw, rows = raw+info.RawBytes, rows+info.Rows
		}
	}
	for _, lo := range m.LargeObjects {
		if info, ok := src.Stream(lo.Stream); ok {
			raw += info.RawBytes
		}
	}
	return raw, rows
}

// Summarize returns what `pgsprint list` shows of an archive opened for
// Scan: its manifest, its tables with their totals and every stream's
// totals. A Reader has them in its footer; a Demux reads the archive to
// its end (the totals come with each stream's end) and checks every frame
// on the way, so an incomplete archive is an error.
func Summarize(ar Source) (*Manifest, []TableSummary, []StreamInfo, error) {
	switch ar := ar.(type) {
	case *Reader:
		return ar.Manifest(), ar.Tables(), ar.Streams(), nil
	case *Demux:
		if err := ar.Finish(); err != nil {
			return nil, nil, nil, err
		}
		return ar.Manifest(), tablesOf(ar.Manifest(), ar.Stream), ar.Streams(), nil
	}
	return nil, nil, nil, fmt.Errorf("archive: cannot summarize a %T", ar)
}

// Check is `pgsprint verify` of an archive opened for Scan: a Reader
// checks its streams workers at a time (Reader.Verify); a Demux checks
// every frame as it passes, then the manifest's entries against the
// streams read. It returns ctx's error if ctx ends first.
func Check(ctx context.Context, ar Source, workers int) error {
	switch ar := ar.(type) {
	case *Reader:
		return ar.Verify(ctx, workers)
	case *Demux:
		select {
		case <-ar.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := ar.Finish(); err != nil {
			return err
		}
		if errs := checkManifest(ar.Manifest(), ar.Streams()); len(errs) > 0 {
			return &verifyError{errs: errs}
		}
		return nil
	}
	return fmt.Errorf("archive: cannot check a %T", ar)
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
