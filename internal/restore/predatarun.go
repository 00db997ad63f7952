package restore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// restoreSchema creates the selection's pre-data objects with pg_restore:
// one run, as it always was, or, when the schema has a big level of
// independent entries (splitPreData), the plan's steps, each on up to Jobs
// connections at once. pg_restore (17+ with --transaction-size) runs every
// entry; the split decides only which entries each run gets.
//
// cfg is where pre-data goes; with --create, the database to connect to
// for creating the archived one, created (which later steps run in).
// Either way, pre-data is all or nothing to the journal: it records
// pre-data only after the last run, so a failure anywhere leaves it to be
// dropped and done again (preData.prepare). A failing run cancels the
// others (their pg_restore is killed, rolling back its transaction) and
// its error is the one reported.
func (p *preData) restoreSchema(ctx context.Context, cfg, created *pgx.ConnConfig) error {
	if p.kg != nil && p.opts.KeepGoing {
		return p.keepGoingSchema(ctx, cfg)
	}
	steps, err := p.planSchema(ctx)
	if err != nil {
		// Without a plan, one pg_restore run does it all, as before.
		p.log.Warn("pre-data in one pg_restore run", "reason", err)
	}
	if steps == nil {
		if p.opts.Create {
			return p.schema.pgRestore(ctx, cfg, "--section=pre-data", "--create", cleanFlag(p.opts.Clean), p.sel.useList())
		}
		return p.schema.pgRestore(ctx, cfg, "--section=pre-data", p.sel.useList())
	}
	for i, s := range steps {
		sizes := make([]int, len(s.runs))
		for j, r := range s.runs {
			sizes[j] = len(r)
		}
		p.log.Debug("pre-data step", "step", i+1, "of", len(steps), "runs", sizes)
		// No --section=pre-data: the lists hold pre-data entries only, and
		// pg_restore -L moves the listed entries after the others, where a
		// comment or ACL at a list's head (their section is none) would
		// take the section of the post-data entry before it and be left out.
		to, flags := cfg, []string{}
		if s.create {
			flags = append(flags, "--create", cleanFlag(p.opts.Clean))
		} else if p.opts.Create {
			to = created
		}
		if err := p.runStep(ctx, to, s.runs, flags); err != nil {
			return err
		}
	}
	return nil
}

// runStep runs one pg_restore --use-list per run of a step at once.
func (p *preData) runStep(ctx context.Context, cfg *pgx.ConnConfig, runs [][]int, flags []string) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range runs {
		g.Go(func() error {
			list, err := writeList(r)
			if err != nil {
				return err
			}
			defer removeList(list)
			return p.schema.pgRestore(gctx, cfg, slices.Concat(flags, []string{"--use-list=" + list})...)
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

// planSchema reads the selection's pre-data entries and plans them
// (splitPreData); nil is one pg_restore run. It lists the entries first,
// and reads their dependencies (pg_restore's verbose script) only when
// there are enough of them to split.
func (p *preData) planSchema(ctx context.Context) ([]preDataStep, error) {
	o := preDataSplitOptions{jobs: p.opts.Jobs, splitMin: cmp.Or(p.opts.PreDataSplitMin, defaultPreDataSplitMin), create: p.opts.Create}
	if o.jobs < 2 || o.splitMin < 0 {
		return nil, nil
	}
	flags := []string{"--section=pre-data", p.schema.statisticsFlag()}
	if o.create {
		flags = append(flags, "--create") // lists the database's own entries
	}
	ids, err := listIDs(p.schema.pgRestoreCmd(ctx, append(append([]string{"--list"}, flags...), p.schema.file)...))
	if err != nil {
		return nil, fmt.Errorf("pg_restore --list: %w", pg.ToolFailure(err))
	}
	if p.sel.ids != nil {
		ids = keepIDs(ids, p.sel.ids)
	}
	if len(ids) < o.splitMin {
		return nil, nil
	}
	args := append(append([]string{"--verbose", "--file=-"}, flags...), p.schema.ownershipFlags()...)
	script, err := p.schema.pgRestoreCmd(ctx, append(append(args, p.sel.useList()), p.schema.file)...).Output()
	if err != nil {
		return nil, fmt.Errorf("pg_restore --file: %w", pg.ToolFailure(err))
	}
	parsed, err := toc.ParseWhole(string(script), ids)
	if err != nil {
		return nil, err
	}
	return splitPreData(parsed.Entries, ids, o), nil
}
