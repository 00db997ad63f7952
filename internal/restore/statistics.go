package restore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/taskgraph"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// stepStatistics is the journal step of the statistics restore.
const stepStatistics = "statistics"

// statistics are the optimizer statistics (pg_dump 18's STATISTICS DATA
// entries) a restore brings back, after everything else: tables' and
// indexes', materialized views' (after their refresh, which would reset
// them) and partitioned tables'.
//
// Whether the archive may carry them at all is the schema archive's
// (withStats), which keeps them out of every other pg_restore run.
type statistics struct {
	ids []int // the entries to restore, in the archive's order
	// tables are the loaded tables (taskgraph.TableKey) whose statistics
	// come back, which are not analyzed: ANALYZE would only recompute
	// them from a sample.
	tables map[string]bool
}

// chooseStatistics picks the STATISTICS DATA entries to restore: into a
// target of PostgreSQL 18 or later (older ones lack pg_restore_*_stats),
// unless --no-statistics, --schema-only or --data-only (as pg_restore),
// those the selection keeps, but never a table's or its indexes' when the
// table's rows are not loaded (--exclude-table-data): its statistics would
// describe rows it does not have; with no rows loaded at all (--no-data,
// --statistics-only) every table's comes back, as pg_restore's does. A table with extended statistics
// (CREATE STATISTICS), which pg_dump does not carry, is analyzed anyway.
// It is part of the choose stage, once the target's version is known.
func chooseStatistics(ctx context.Context, schema *schemaArchive, sel *selection, noStatistics bool, targetMajor int, log *slog.Logger) (statistics, error) {
	stats := statistics{tables: map[string]bool{}}
	m := sel.m
	if !schema.withStats || noStatistics || sel.noStats {
		return stats, nil
	}
	listing, err := schema.list(ctx)
	if err != nil {
		return stats, err
	}
	if !strings.Contains(string(listing), " STATISTICS DATA ") {
		return stats, nil
	}
	if targetMajor < 18 {
		log.Warn("the archive carries optimizer statistics, which a server older than PostgreSQL 18 cannot take: tables are analyzed instead", "target", targetMajor)
		return stats, nil
	}
	order, err := toc.ListIDs(string(listing))
	if err != nil {
		return stats, err
	}
	script, err := schema.command(ctx, schema.tools.PgRestore(), "--verbose", "--file=-", schema.file).Output()
	if err != nil {
		return stats, fmt.Errorf("pg_restore --file: %w", pg.ToolFailure(err))
	}
	parsed, err := toc.ParseWhole(string(script), order)
	if err != nil {
		return stats, err
	}
	byID := map[int]*toc.Entry{}
	for i := range parsed.Entries {
		byID[parsed.Entries[i].ID] = &parsed.Entries[i]
	}
	kinds, keys := map[uint32]string{}, map[uint32]string{}
	for _, o := range m.Relations {
		kinds[o.OID], keys[o.OID] = o.Kind, taskgraph.TableKey(o.Schema, o.Name)
	}
	loaded := map[string]bool{}
	for _, t := range m.Tables {
		loaded[taskgraph.TableKey(t.Schema, t.Name)] = true
	}
	// relation finds the relation an entry is about, directly or, for an
	// index or constraint, through the table it depends on.
	var relation func(e *toc.Entry, depth int) (uint32, bool)
	relation = func(e *toc.Entry, depth int) (uint32, bool) {
		for _, d := range e.Deps {
			de := byID[d]
			switch {
			case de == nil:
			case de.Class == relationClass && kinds[de.OID] != "":
				return de.OID, true
			case depth == 0 && (de.Type == "INDEX" || de.Type == "CONSTRAINT"):
				return relation(de, 1)
			}
		}
		return 0, false
	}
	chosen := func(id int) bool { return sel.ids == nil || sel.ids[id] }
	extended := map[string]bool{}
	want := map[int]bool{}
	for i := range parsed.Entries {
		e := &parsed.Entries[i]
		if !chosen(e.ID) {
			continue
		}
		oid, ok := relation(e, 0)
		switch {
		case e.Type == "STATISTICS" && ok:
			extended[keys[oid]] = true
		case e.Type != "STATISTICS DATA":
		case !ok || kinds[oid] != "r":
			want[e.ID] = true // a materialized view's, a partitioned table's...
		case loaded[keys[oid]] || sel.noRows():
			want[e.ID] = true
			if d := byID[e.Deps[0]]; d != nil && d.Class == relationClass && d.OID == oid {
				stats.tables[keys[oid]] = true // the table's own, not an index's
			}
		}
	}
	for k := range extended {
		delete(stats.tables, k)
	}
	for _, id := range order {
		if want[id] {
			stats.ids = append(stats.ids, id)
		}
	}
	log.Info("optimizer statistics from the archive", "entries", len(stats.ids), "tables not analyzed", len(stats.tables))
	return stats, nil
}

// restoreStatistics restores the chosen STATISTICS DATA entries, after
// the data, the indexes and the materialized views' refresh, in one
// transaction with its journal step: the finish stage's last work.
func (f *finishStage) restoreStatistics(ctx context.Context) error {
	if len(f.stats.ids) == 0 || f.target.j.IsDone(stepStatistics) {
		return nil
	}
	if err := f.schema.restoreIDs(ctx, f.target, stepStatistics, f.stats.ids); err != nil {
		return fmt.Errorf("restore statistics: %w", err)
	}
	return nil
}
