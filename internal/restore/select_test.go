package restore

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/journal"
)

// testManifest has two tables (the first in two chunks), a sequence, a
// materialized view and two large objects.
func testManifest() *archive.Manifest {
	return &archive.Manifest{
		Tables:       []archive.Table{{Schema: "app", Name: "orders"}, {Schema: "app", Name: "log"}},
		Chunks:       []archive.Chunk{{Stream: 1, Table: 0, Where: "a"}, {Stream: 2, Table: 0, Where: "b"}, {Stream: 3, Table: 1}},
		Sequences:    []archive.Sequence{{Schema: "app", Name: "orders_id_seq"}},
		Matviews:     []archive.QualifiedRel{{Schema: "app", Name: "totals"}},
		LargeObjects: []archive.LargeObject{{Stream: 4, OID: 10}, {Stream: 5, OID: 11}},
	}
}

// TestChooseWithoutTarget: the choose stage's refusals and its narrowing
// of the manifest, in the cases that need neither pg_restore nor a server:
// what it keeps is what the later stages load, and what it leaves out is
// what the source is told it will never be asked for.
func TestChooseWithoutTarget(t *testing.T) {
	dataOnlyArchive := testManifest()
	dataOnlyArchive.DataOnly = true
	// An archive dumped from a database holding an unfinished restore's
	// journal, by a pgsprint that did not leave it out.
	withJournal := testManifest()
	withJournal.Relations = []archive.Object{{Schema: "app", Name: "orders", Kind: "r"}, {Schema: "app", Name: "log", Kind: "r"}, {Schema: journal.Schema, Name: "steps", Kind: "r"}}
	for _, tc := range []struct {
		name    string
		opts    Options
		m       *archive.Manifest
		wantErr string
		tables  int
		chunks  int
		los     int
		seqs    int
		skipped []uint32
	}{
		{name: "everything", m: testManifest(), tables: 2, chunks: 3, los: 2, seqs: 1},
		{name: "--data-only keeps every table's data", opts: Options{Filter: filter.Options{Selection: filter.Selection{DataOnly: true}}}, m: testManifest(), tables: 2, chunks: 3, los: 2, seqs: 1},
		{name: "--schema-only loads nothing", opts: Options{Filter: filter.Options{Selection: filter.Selection{SchemaOnly: true}}}, m: testManifest(), skipped: []uint32{1, 2, 3, 4, 5}},
		{name: "--schema-only of a --data-only archive", opts: Options{Filter: filter.Options{Selection: filter.Selection{SchemaOnly: true}}}, m: dataOnlyArchive, wantErr: "no schema to restore"},
		{name: "--data-only with --clean", opts: Options{Clean: true, Filter: filter.Options{Selection: filter.Selection{DataOnly: true}}}, m: testManifest(), wantErr: "does not take --create or --clean"},
		{name: "a --data-only archive with --create", opts: Options{Create: true}, m: dataOnlyArchive, wantErr: "does not take --create or --clean"},
		{name: "--disable-triggers without --data-only", opts: Options{DisableTriggers: true}, m: testManifest(), wantErr: "--data-only restores only"},
		{name: "-L with -t", opts: Options{UseList: "list", Filter: filter.Options{Selection: filter.Selection{Tables: []string{"x"}}}}, m: testManifest(), wantErr: "does not combine"},
		{name: "an archive carrying a journal", m: withJournal, wantErr: "the archive holds schema \"pgsprint_journal\", the journal of a pgsprint restore or clone that was unfinished in the source database when it was dumped (its data may be incomplete): leave it out with -N pgsprint_journal"},
		{name: "--data-only of an archive carrying a journal", opts: Options{Filter: filter.Options{Selection: filter.Selection{DataOnly: true}}}, m: withJournal, tables: 2, chunks: 3, los: 2, seqs: 1},
		{name: "-t on an archive without an object list", opts: Options{Filter: filter.Options{Selection: filter.Selection{Tables: []string{"app.log"}}}}, m: testManifest(), wantErr: "without restore-side selection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var skipped []uint32
			skip := func(ids ...uint32) { skipped = append(skipped, ids...) }
			sel, err := choose(context.Background(), tc.opts, tc.m, nil, nil, slog.New(slog.DiscardHandler), skip)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer sel.remove()
			m := sel.m
			if len(m.Tables) != tc.tables || len(m.Chunks) != tc.chunks || len(m.LargeObjects) != tc.los || len(m.Sequences) != tc.seqs {
				t.Errorf("kept %d tables, %d chunks, %d large objects, %d sequences; want %d, %d, %d, %d",
					len(m.Tables), len(m.Chunks), len(m.LargeObjects), len(m.Sequences), tc.tables, tc.chunks, tc.los, tc.seqs)
			}
			slices.Sort(skipped)
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped streams %v, want %v", skipped, tc.skipped)
			}
			if sel.list != "" || sel.useList() != "" {
				t.Errorf("a selection without schema entries has list %q", sel.list)
			}
			if want := tc.opts.Filter.DataOnly || tc.m.DataOnly; sel.dataOnly != want || m.DataOnly != want {
				t.Errorf("dataOnly %v (manifest %v), want %v", sel.dataOnly, m.DataOnly, want)
			}
		})
	}
}

// TestNarrow: a selection keeps its relations' tables (chunks renumbered
// to them) unless their data is excluded, their sequences and views, and
// large objects only when no -n or -t narrowed it; the streams of
// everything else are skipped.
func TestNarrow(t *testing.T) {
	full := testManifest()
	orders := filter.Rel{Schema: "app", Name: "orders"}
	logRel := filter.Rel{Schema: "app", Name: "log"}
	matched := &filter.Matched{
		Relations: map[filter.Rel]bool{logRel: true, orders: true, {Schema: "app", Name: "totals"}: true},
		NoData:    map[filter.Rel]bool{orders: true},
	}
	m := narrow(full, matched, false, false)
	if len(m.Tables) != 1 || m.Tables[0].Name != "log" {
		t.Fatalf("tables %+v, want app.log alone", m.Tables)
	}
	if want := []archive.Chunk{{Stream: 3, Table: 0}}; !reflect.DeepEqual(m.Chunks, want) {
		t.Errorf("chunks %+v, want %+v", m.Chunks, want)
	}
	if len(m.Sequences) != 0 || len(m.Matviews) != 1 || len(m.LargeObjects) != 0 {
		t.Errorf("sequences %v, matviews %v, large objects %v", m.Sequences, m.Matviews, m.LargeObjects)
	}
	var skipped []uint32
	skipUnread(full, m, func(ids ...uint32) { skipped = append(skipped, ids...) })
	if want := []uint32{1, 2, 4, 5}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if len(full.Tables) != 2 || full.Chunks[2].Table != 1 {
		t.Errorf("narrow changed the whole manifest: %+v", full)
	}
}
