package restore

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
)

// selection is the part of the archive a restore takes: the zero value
// takes everything.
type selection struct {
	// list is a pg_restore --use-list file naming the schema entries to
	// restore, in the archive's order; empty for all of them.
	list string
	ids  map[int]bool // the entries in list
	// refs are the target's foreign keys, table to referenced tables, for
	// the order of --data-only loads.
	refs map[string][]string
	// relations are the relations the selection creates (those the
	// patterns name but what goes with an excluded table, and the
	// sequences that come with their tables),
	// quoted and qualified, and schemas the schemas it creates: none may
	// exist in the target before pre-data.
	relations []string
	schemas   []string
	// dataOnly loads rows into existing tables and creates nothing;
	// schemaOnly creates objects and loads nothing.
	dataOnly, schemaOnly bool
}

// Selection is the part of an archive a partial restore takes, for
// writing it as SQL (restore --to-sql), where no target is at hand: as if
// into an empty database.
type Selection struct {
	// Manifest is the archive's, narrowed to the selected tables, chunks,
	// sequences, materialized views and large objects.
	Manifest *archive.Manifest
	// List is a pg_restore --use-list file of the schema entries to
	// write; empty for all of them.
	List string
	sel  selection
}

// Close removes the list file.
func (s *Selection) Close() { s.sel.remove() }

// Select applies f to the archive ar as a restore into an empty database
// would (schemas of selected tables come too; foreign keys to tables left
// out do not).
func Select(ctx context.Context, ar archive.Source, f filter.Options, log *slog.Logger) (*Selection, error) {
	return SelectList(ctx, ar, f, "", log)
}

// SelectList is Select with a restore -L list (useList, a file; empty for
// none) instead of or besides the patterns.
func SelectList(ctx context.Context, ar archive.Source, f filter.Options, useList string, log *slog.Logger) (*Selection, error) {
	r, cleanup, err := offlineRun(ctx, ar, Options{Filter: f, UseList: useList}, log)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	if err := r.chooseParts(ctx, func(...uint32) {}); err != nil {
		r.sel.remove()
		return nil, err
	}
	return &Selection{Manifest: r.m, List: r.sel.list, sel: r.sel}, nil
}

// remove deletes the list file.
func (s *selection) remove() {
	if s.list != "" {
		os.Remove(s.list)
	}
}

// useList is the pg_restore flag restricting it to the selection, or "".
func (s *selection) useList() string {
	if s.list == "" {
		return ""
	}
	return "--use-list=" + s.list
}

// chooseParts applies -n/-N/-t/-T, --schema-only and --data-only: it
// narrows r.m to the tables, chunks, sequences, materialized views and
// large objects to restore (so the rest of the restore, and the journal's
// identity, see only those), tells the source which streams will never be
// read, and picks the schema entries. skip is the source's way to drop
// unread streams.
func (r *run) chooseParts(ctx context.Context, skip func(...uint32)) error {
	f := r.opts.Filter
	r.sel.dataOnly = f.DataOnly || r.m.DataOnly
	r.sel.schemaOnly = f.SchemaOnly
	switch {
	case r.sel.schemaOnly && r.m.DataOnly:
		return fmt.Errorf("the archive was dumped with --data-only: it has no schema to restore")
	case r.sel.dataOnly && (r.opts.Create || r.opts.Clean):
		return fmt.Errorf("--data-only loads into existing tables: it does not take --create or --clean")
	case r.opts.DisableTriggers && !r.sel.dataOnly:
		return fmt.Errorf("--disable-triggers applies to --data-only restores only")
	case r.opts.UseList != "" && f.Active():
		return fmt.Errorf("-L/--use-list does not combine with -n/-N/-t/-T/--exclude-table-data: edit the list instead")
	case r.opts.UseList != "":
		full, err := r.chooseFromList(ctx)
		if err != nil {
			return err
		}
		skipUnread(full, r.m, skip)
		return nil
	case !f.Active() && !r.sel.dataOnly && !r.sel.schemaOnly:
		return nil
	}
	var matched *filter.Matched
	if f.Active() {
		if len(r.m.Relations) == 0 && len(r.m.Tables) > 0 {
			return fmt.Errorf("the archive was written by a pgsprint without restore-side selection (no object list): dump it again to restore part of it")
		}
		var schemas []string
		for _, s := range r.m.Schemas {
			schemas = append(schemas, s.Name)
		}
		var rels []filter.Rel
		for _, o := range r.m.Relations {
			rels = append(rels, filter.Rel{Schema: o.Schema, Name: o.Name})
		}
		var err error
		if matched, err = f.Match(r.m.Database, schemas, rels); err != nil {
			return err
		}
	}
	full := *r.m
	r.m = narrow(&full, matched, r.sel.schemaOnly)
	r.m.DataOnly = r.sel.dataOnly
	skipUnread(&full, r.m, skip)
	if matched == nil || r.sel.dataOnly {
		return nil
	}
	return r.chooseEntries(ctx, &full, matched)
}

// skipUnread tells the source (skip) which streams of the whole manifest
// full the narrowed manifest m will never read.
func skipUnread(full, m *archive.Manifest, skip func(...uint32)) {
	kept := map[uint32]bool{}
	for _, c := range m.Chunks {
		kept[c.Stream] = true
	}
	for _, lo := range m.LargeObjects {
		kept[lo.Stream] = true
	}
	var unread []uint32
	for _, c := range full.Chunks {
		if !kept[c.Stream] {
			unread = append(unread, c.Stream)
		}
	}
	for _, lo := range full.LargeObjects {
		if !kept[lo.Stream] {
			unread = append(unread, lo.Stream)
		}
	}
	skip(unread...)
}

// narrow returns the manifest of what is restored: the selected relations'
// tables (chunks renumbered to them) but those whose data is excluded,
// sequences and materialized views; large objects unless -n or -t narrow
// the selection, as in pg_dump.
func narrow(m *archive.Manifest, matched *filter.Matched, schemaOnly bool) *archive.Manifest {
	out := *m
	out.Tables, out.Chunks, out.Sequences, out.Matviews, out.LargeObjects = nil, nil, nil, nil, nil
	if schemaOnly {
		return &out
	}
	keep := func(schema, name string) bool {
		return matched == nil || matched.Relations[filter.Rel{Schema: schema, Name: name}]
	}
	index := map[int]int{}
	for i, t := range m.Tables {
		if keep(t.Schema, t.Name) && (matched == nil || !matched.NoData[filter.Rel{Schema: t.Schema, Name: t.Name}]) {
			index[i] = len(out.Tables)
			out.Tables = append(out.Tables, t)
		}
	}
	for _, c := range m.Chunks {
		if j, ok := index[c.Table]; ok {
			c.Table = j
			out.Chunks = append(out.Chunks, c)
		}
	}
	for _, s := range m.Sequences {
		if keep(s.Schema, s.Name) {
			out.Sequences = append(out.Sequences, s)
		}
	}
	for _, mv := range m.Matviews {
		if keep(mv.Schema, mv.Name) {
			out.Matviews = append(out.Matviews, mv)
		}
	}
	if matched == nil || matched.LargeObjects {
		out.LargeObjects = m.LargeObjects
	}
	return &out
}
