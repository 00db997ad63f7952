package restore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/tempfile"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// stepStatistics is the journal step of the statistics restore.
const stepStatistics = "statistics"

// statistics are the optimizer statistics (pg_dump 18's STATISTICS DATA
// entries) a restore brings back, after everything else: tables' and
// indexes', materialized views' (after their refresh, which would reset
// them) and partitioned tables'.
type statistics struct {
	// inArchive: the schema stream was written by pg_dump 18 or later,
	// which may carry statistics; every other pg_restore run is told
	// --no-statistics, so none is restored before its data is in.
	inArchive bool
	ids       []int // the entries to restore, in the archive's order
	// tables are the loaded tables (schedule.TableKey) whose statistics
	// come back, which are not analyzed: ANALYZE would only recompute
	// them from a sample.
	tables map[string]bool
}

// statisticsFlag is the flag that keeps statistics out of a pg_restore
// run other than the statistics step.
func (r *run) statisticsFlag() string {
	if r.stats.inArchive {
		return "--no-statistics"
	}
	return ""
}

// chooseStatistics picks the STATISTICS DATA entries to restore: into a
// target of PostgreSQL 18 or later (older ones lack pg_restore_*_stats),
// unless --no-statistics, --schema-only or --data-only (as pg_restore),
// those the selection keeps, but never a table's or its indexes' when the
// table's rows are not loaded (--exclude-table-data): its statistics would
// describe rows it does not have. A table with extended statistics
// (CREATE STATISTICS), which pg_dump does not carry, is analyzed anyway.
func (r *run) chooseStatistics(ctx context.Context, targetMajor int) error {
	r.stats = statistics{inArchive: majorOf(r.m.PgDumpVersion) >= 18 && r.tools.Major >= 18, tables: map[string]bool{}}
	if !r.stats.inArchive || r.opts.NoStatistics || r.sel.dataOnly || r.sel.schemaOnly || r.m.DataOnly {
		return nil
	}
	listing, err := r.command(ctx, r.tools.PgRestore(), "--list", r.schema).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --list: %w", err)
	}
	if !strings.Contains(string(listing), " STATISTICS DATA ") {
		return nil
	}
	if targetMajor < 18 {
		r.log.Warn("the archive carries optimizer statistics, which a server older than PostgreSQL 18 cannot take: tables are analyzed instead", "target", targetMajor)
		return nil
	}
	order, err := toc.ListIDs(string(listing))
	if err != nil {
		return err
	}
	script, err := r.command(ctx, r.tools.PgRestore(), "--verbose", "--file=-", r.schema).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --file: %w", err)
	}
	parsed, err := toc.ParseWhole(string(script), order)
	if err != nil {
		return err
	}
	byID := map[int]*toc.Entry{}
	for i := range parsed.Entries {
		byID[parsed.Entries[i].ID] = &parsed.Entries[i]
	}
	kinds, keys := map[uint32]string{}, map[uint32]string{}
	for _, o := range r.m.Relations {
		kinds[o.OID], keys[o.OID] = o.Kind, schedule.TableKey(o.Schema, o.Name)
	}
	loaded := map[string]bool{}
	for _, t := range r.m.Tables {
		loaded[schedule.TableKey(t.Schema, t.Name)] = true
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
	chosen := func(id int) bool { return r.sel.ids == nil || r.sel.ids[id] }
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
		case loaded[keys[oid]]:
			want[e.ID] = true
			if d := byID[e.Deps[0]]; d != nil && d.Class == relationClass && d.OID == oid {
				r.stats.tables[keys[oid]] = true // the table's own, not an index's
			}
		}
	}
	for k := range extended {
		delete(r.stats.tables, k)
	}
	for _, id := range order {
		if want[id] {
			r.stats.ids = append(r.stats.ids, id)
		}
	}
	r.log.Info("optimizer statistics from the archive", "entries", len(r.stats.ids), "tables not analyzed", len(r.stats.tables))
	return nil
}

// restoreStatistics restores the chosen STATISTICS DATA entries, after
// the data, the indexes and the materialized views' refresh, in one
// transaction with its journal step.
func (r *run) restoreStatistics(ctx context.Context) error {
	if len(r.stats.ids) == 0 || r.j.isDone(stepStatistics) {
		return nil
	}
	f, err := tempfile.Create("", tempfile.List)
	if err != nil {
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	defer os.Remove(f.Name())
	var b strings.Builder
	for _, id := range r.stats.ids {
		b.WriteString(strconv.Itoa(id) + ";\n")
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write pg_restore list: %w", err)
	}
	if err := r.pgRestoreAtomic(ctx, stepStatistics, "--use-list="+f.Name()); err != nil {
		return fmt.Errorf("restore statistics: %w", err)
	}
	return nil
}
