package restore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// postData is the post-data stage: indexes, constraints, foreign keys,
// triggers and the rest of pg_dump's post-data section. Taken apart by
// toc as pg_restore prints it, its entries become tasks of the data
// stage's graph (they start as soon as their tables are loaded); when its
// table of contents cannot be taken apart, pg_restore does all of it after
// the loads (rest).
type postData struct {
	schema *schemaArchive
	sel    *selection
	log    *slog.Logger
	// planned says the entries are tasks of the graph (addTasks); false
	// leaves all of post-data to rest (none when the selection is
	// --data-only).
	planned bool
	// sessionSQL is pg_restore's preamble, the session settings the
	// entries' SQL assumes.
	sessionSQL []string
}

// newPostData is the post-data stage of the selection sel, read from the
// schema archive when the data stage lays out its graph.
func newPostData(schema *schemaArchive, sel *selection, log *slog.Logger) *postData {
	return &postData{schema: schema, sel: sel, log: log}
}

// addTasks lays out post-data in the graph g after the loads of the
// tables in opts, with an ANALYZE per table unless opts say otherwise:
// each entry is planned as pg_restore prints it, so that the entries of a
// schema of 100,000 tables are never all held beside the graph. If the
// script cannot be read or taken apart to its end, the graph is left as
// it was and pg_restore does all of post-data after the loads.
func (p *postData) addTasks(ctx context.Context, g *schedule.Graph, opts schedule.PostDataOptions) {
	if p.sel.dataOnly {
		return
	}
	if err := p.plan(ctx, g, opts); err != nil {
		// A cancelled run (interrupted, or another database of --all
		// failed) says why it stopped, once, elsewhere.
		if ctx.Err() == nil {
			p.log.Warn("post-data left to pg_restore", "reason", err)
		}
		return
	}
	p.planned = true
}

// plan reads the schema archive's post-data entries with their SQL and
// dependencies into g. An error means the post-data cannot be taken apart
// and pg_restore must do all of it; g is then as it was.
func (p *postData) plan(ctx context.Context, g *schedule.Graph, opts schedule.PostDataOptions) error {
	// Indexes' statistics are post-data too: they come with the others
	// (restoreStatistics), never before their table's data is in.
	noStats := p.schema.statisticsFlag()
	ids, err := listIDs(p.schema.pgRestoreCmd(ctx, "--list", "--section=post-data", noStats, p.schema.file))
	if err != nil {
		return fmt.Errorf("pg_restore --list: %w", pg.ToolFailure(err))
	}
	args := append([]string{"--verbose", "--file=-", "--section=post-data", noStats}, p.schema.ownershipFlags()...)
	if p.sel.ids != nil {
		ids = keepIDs(ids, p.sel.ids)
		args = append(args, p.sel.useList())
	}
	pp := schedule.NewPostData(g, ids, opts)
	pre, err := eachEntry(p.schema.pgRestoreCmd(ctx, append(args, p.schema.file)...), ids, func(e *toc.Entry) error {
		pp.Add(e)
		return nil
	})
	if err != nil {
		pp.Abandon()
		return fmt.Errorf("pg_restore --file: %w", pg.ToolFailure(err))
	}
	pp.Finish()
	p.sessionSQL = pre
	return nil
}

// keepIDs returns the ids in chosen, in their order.
func keepIDs(ids []int, chosen map[int]bool) []int {
	var out []int
	for _, id := range ids {
		if chosen[id] {
			out = append(out, id)
		}
	}
	return out
}

// preamble is pg_restore's session settings, run on a worker connection
// before post-data SQL.
func (p *postData) preamble() []string {
	return p.sessionSQL
}

// leftToPgRestore reports whether rest has work: post-data could not be
// taken apart (and the selection creates objects).
func (p *postData) leftToPgRestore() bool {
	return !p.planned && !p.sel.dataOnly
}

// rest creates indexes, constraints, triggers and the rest of post-data
// when its table of contents could not be taken apart: in one transaction
// with its journal step, so on one connection (this is the fallback path,
// and correctness after an interruption comes first).
func (p *postData) rest(ctx context.Context, t *target) error {
	if t.j.IsDone("post-data") {
		return nil
	}
	return p.schema.pgRestoreAtomic(ctx, t, "post-data", "--section=post-data", p.sel.useList(), p.schema.statisticsFlag())
}
