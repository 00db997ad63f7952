package restore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pgsprint/pgsprint/internal/schedule"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// postData is the post-data stage: indexes, constraints, foreign keys,
// triggers and the rest of pg_dump's post-data section. Taken apart by
// toc, its entries become tasks of the data stage's graph (they start as
// soon as their tables are loaded); when its table of contents cannot be
// taken apart, pg_restore does all of it after the loads (rest).
type postData struct {
	schema *schemaArchive
	sel    *selection
	// script is post-data parsed into entries; nil leaves all of it to
	// rest (and none when the selection is --data-only).
	script *toc.Script
}

// planPostData is the post-data stage of the selection sel, before the
// loads: its entries read from the schema archive.
func planPostData(ctx context.Context, schema *schemaArchive, sel *selection, log *slog.Logger) *postData {
	p := &postData{schema: schema, sel: sel}
	if sel.dataOnly {
		return p
	}
	script, err := p.readScript(ctx)
	if err != nil {
		// Without a parsed table of contents, pg_restore does all of
		// post-data after the data is in.
		log.Warn("post-data left to pg_restore", "reason", err)
		return p
	}
	p.script = script
	return p
}

// readScript reads the schema archive's post-data entries with their
// SQL and dependencies. An error means the post-data cannot be taken apart
// and pg_restore must do all of it.
func (p *postData) readScript(ctx context.Context) (*toc.Script, error) {
	// Indexes' statistics are post-data too: they come with the others
	// (restoreStatistics), never before their table's data is in.
	noStats := p.schema.statisticsFlag()
	list, err := p.schema.pgRestoreCmd(ctx, "--list", "--section=post-data", noStats, p.schema.file).Output()
	if err != nil {
		return nil, fmt.Errorf("pg_restore --list: %w", err)
	}
	ids, err := toc.ListIDs(string(list))
	if err != nil {
		return nil, err
	}
	args := append([]string{"--verbose", "--file=-", "--section=post-data", noStats}, p.schema.ownershipFlags()...)
	if p.sel.ids != nil {
		ids = keepIDs(ids, p.sel.ids)
		args = append(args, p.sel.useList())
	}
	script, err := readScript(p.schema.pgRestoreCmd(ctx, append(args, p.schema.file)...), ids)
	if err != nil {
		return nil, fmt.Errorf("pg_restore --file: %w", err)
	}
	return script, nil
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

// addTasks lays out post-data in the graph g after the loads of the
// tables in opts, with an ANALYZE per table unless opts say otherwise.
func (p *postData) addTasks(g *schedule.Graph, opts schedule.PlanOptions) error {
	if p.script == nil {
		return nil
	}
	_, err := schedule.PlanPostData(g, p.script, opts)
	// The parsed entries are not kept for the run (their SQL is in the
	// graph's tasks now; only the preamble is used again): with 100,000
	// tables they are tens of MB.
	p.script = &toc.Script{Preamble: p.script.Preamble}
	return err
}

// preamble is pg_restore's session settings, run on a worker connection
// before post-data SQL.
func (p *postData) preamble() []string {
	if p.script == nil {
		return nil
	}
	return p.script.Preamble
}

// leftToPgRestore reports whether rest has work: post-data could not be
// taken apart (and the selection creates objects).
func (p *postData) leftToPgRestore() bool {
	return p.script == nil && !p.sel.dataOnly
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
