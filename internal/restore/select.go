package restore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// selection is the part of the archive a restore takes, what the choose
// stage (chooser) makes of the filters, -L and --data-only; every later
// stage reads it.
type selection struct {
	// m is the archive's manifest narrowed to what is restored: tables,
	// chunks, sequences, materialized views and large objects (so that the
	// rest of the restore, and the journal's identity, see only those).
	m *archive.Manifest
	// list is a pg_restore --use-list file naming the schema entries to
	// restore, in the archive's order; empty for all of them.
	list string
	ids  map[int]bool // the entries in list
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
	// statsOnly restores the optimizer statistics alone, into existing
	// tables (--statistics-only; dataOnly too, with nothing to load);
	// noStats leaves them out (--schema-only, --data-only).
	statsOnly, noStats bool
}

// noRows says whether no rows are loaded while statistics may still be
// restored: every table's then comes back (as pg_restore --no-data and
// --statistics-only do), not only those of loaded tables.
func (s *selection) noRows() bool {
	return s.schemaOnly || s.statsOnly || (s.m != nil && s.m.StatisticsWithoutData)
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
	opts := Options{Filter: f, UseList: useList}
	schema, cleanup, err := offlineSchema(ctx, ar, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	sel, err := choose(ctx, opts, ar.Manifest(), schema, nil, logger(log), func(...uint32) {})
	if err != nil {
		return nil, err
	}
	return &Selection{Manifest: sel.m, List: sel.list, sel: *sel}, nil
}

// chooser is the choose stage: it applies the filters, -L and --data-only
// to the archive's manifest and makes the selection every later stage
// reads. Its target is nil when there is none (Select): then the
// selection is made as for an empty database.
type chooser struct {
	opts   Options
	target *pgx.ConnConfig // where to look for what exists; nil: nowhere
	schema *schemaArchive
	log    *slog.Logger
	m      *archive.Manifest // the whole manifest, then the narrowed one
	sel    selection
}

// choose is the choose stage: the selection of the archive whose whole
// manifest is m, restored into target (nil: offline). skip is the
// source's way to drop unread streams.
func choose(ctx context.Context, opts Options, m *archive.Manifest, schema *schemaArchive, target *pgx.ConnConfig, log *slog.Logger, skip func(...uint32)) (*selection, error) {
	c := &chooser{opts: opts, target: target, schema: schema, log: log, m: m}
	if err := c.chooseParts(ctx, skip); err != nil {
		c.sel.remove()
		return nil, err
	}
	sel := c.sel
	sel.m = c.m
	return &sel, nil
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
// narrows ch.m to the tables, chunks, sequences, materialized views and
// large objects to restore (so the rest of the restore, and the journal's
// identity, see only those), tells the source which streams will never be
// read, and picks the schema entries. skip is the source's way to drop
// unread streams.
func (ch *chooser) chooseParts(ctx context.Context, skip func(...uint32)) error {
	f := ch.opts.Filter
	ch.sel.dataOnly = f.DataOnly || ch.m.DataOnly || f.StatisticsOnly
	ch.sel.schemaOnly = f.SchemaOnly
	ch.sel.statsOnly = f.StatisticsOnly
	ch.sel.noStats = !f.Statistics()
	switch {
	case ch.sel.schemaOnly && ch.m.DataOnly:
		return fmt.Errorf("the archive was dumped with --data-only: it has no schema to restore")
	case ch.sel.statsOnly && (ch.opts.Create || ch.opts.Clean):
		return fmt.Errorf("--statistics-only restores statistics into existing tables: it does not take --create or --clean")
	case ch.sel.dataOnly && (ch.opts.Create || ch.opts.Clean):
		return fmt.Errorf("--data-only loads into existing tables: it does not take --create or --clean")
	case ch.sel.statsOnly && ch.opts.UseList != "":
		return fmt.Errorf("-L/--use-list does not combine with --statistics-only: keep only the STATISTICS DATA entries in the list instead")
	case ch.opts.DisableTriggers && !ch.sel.dataOnly:
		return fmt.Errorf("--disable-triggers applies to --data-only restores only")
	case ch.opts.UseList != "" && f.Active():
		return fmt.Errorf("-L/--use-list does not combine with -n/-N/-t/-T/--exclude-table-data: edit the list instead")
	case ch.opts.UseList != "":
		full, err := ch.chooseFromList(ctx)
		if err != nil {
			return err
		}
		skipUnread(full, ch.m, skip)
		return nil
	case !f.Active() && !ch.sel.dataOnly && journalKept(ch.m, nil):
		return errArchivedJournal
	case !f.Active() && !ch.sel.dataOnly && !ch.sel.schemaOnly:
		return nil
	}
	var matched *filter.Matched
	if f.Active() {
		if len(ch.m.Relations) == 0 && len(ch.m.Tables) > 0 {
			return fmt.Errorf("the archive was written by a pgsprint without restore-side selection (no object list): dump it again to restore part of it")
		}
		var schemas []string
		for _, s := range ch.m.Schemas {
			schemas = append(schemas, s.Name)
		}
		var rels []filter.Rel
		for _, o := range ch.m.Relations {
			rels = append(rels, filter.Rel{Schema: o.Schema, Name: o.Name})
		}
		var err error
		if matched, err = f.Match(ch.m.Database, schemas, rels); err != nil {
			var none *filter.NoMatchError
			if errors.As(err, &none) {
				none.In = cmp.Or(ch.opts.From, "the archive")
			}
			return err
		}
	}
	if !ch.sel.dataOnly && journalKept(ch.m, matched) {
		return errArchivedJournal
	}
	full := *ch.m
	ch.m = narrow(&full, matched, ch.sel.schemaOnly || ch.sel.statsOnly, f.SequenceData && !ch.sel.statsOnly)
	ch.m.DataOnly = ch.sel.dataOnly
	skipUnread(&full, ch.m, skip)
	if matched == nil || (ch.sel.dataOnly && !ch.sel.statsOnly) {
		return nil
	}
	if err := ch.chooseEntries(ctx, &full, matched); err != nil {
		return err
	}
	if ch.sel.statsOnly {
		// The entries chosen say which statistics; nothing else moves.
		ch.m.Sequences, ch.m.Matviews = nil, nil
	}
	return nil
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
func narrow(m *archive.Manifest, matched *filter.Matched, noRows, sequences bool) *archive.Manifest {
	out := *m
	out.Tables, out.Chunks, out.Sequences, out.Matviews, out.LargeObjects = nil, nil, nil, nil, nil
	keep := func(schema, name string) bool {
		return matched == nil || matched.Relations[filter.Rel{Schema: schema, Name: name}]
	}
	if noRows {
		if sequences { // clone --schema-only --sequence-data
			for _, s := range m.Sequences {
				if keep(s.Schema, s.Name) {
					out.Sequences = append(out.Sequences, s)
				}
			}
		}
		return &out
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

// errArchivedJournal refuses an archive that carries the journal of a
// restore that was unfinished in its source database (written by a
// pgsprint that did not leave it out, dump.Session): restored, it would
// stand where this restore creates its own.
var errArchivedJournal = fmt.Errorf("the archive holds schema %s, the journal of a pgsprint restore or clone that was unfinished in the source database when it was dumped (its data may be incomplete): leave it out with -N %s, or dump the source again once that run is finished",
	pg.Ident(journal.Schema), journal.Schema)

// journalKept says whether the selection matched (nil: everything) of
// the archive whose manifest is m keeps a table of journal.Schema.
func journalKept(m *archive.Manifest, matched *filter.Matched) bool {
	for _, o := range m.Relations {
		if o.Schema == journal.Schema && (matched == nil || matched.Relations[filter.Rel{Schema: o.Schema, Name: o.Name}]) {
			return true
		}
	}
	return false
}
