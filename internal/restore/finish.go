package restore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// finishStage is the finish stage, once data and post-data are in:
// materialized views refreshed, optimizer statistics restored (they would
// be reset by the refresh), and the journal dropped, which marks the
// restore complete.
type finishStage struct {
	target *target
	m      *archive.Manifest // the selection's: its materialized views
	stats  statistics
	schema *schemaArchive
	phases *phases
	log    *slog.Logger
	clean  bool // Options.Clean: the target may hold an earlier copy's subset mark
	// keepJournal: a --keep-going restore left objects out, and its
	// journal stays for the --resume that finishes them.
	keepJournal bool
}

// run is the finish stage.
func (f *finishStage) run(ctx context.Context) error {
	if err := f.phases.run("refresh", func() error { return f.refreshMatviews(ctx) }); err != nil {
		return err
	}
	if len(f.stats.ids) > 0 {
		if err := f.phases.run("statistics", func() error { return f.restoreStatistics(ctx) }); err != nil {
			return err
		}
	}
	if err := f.markSubset(ctx); err != nil {
		return err
	}
	if f.keepJournal {
		return nil
	}
	// Everything is in: the journal goes, and with it the one object the
	// source does not have.
	return journal.Drop(ctx, f.target.cfg)
}

// markSubset records in the target database that it is a development
// copy: a subset (pg.SubsetSetting) and masked (pg.MaskSetting), so that
// compare against the source says so; a whole copy over an earlier
// subset (--clean) removes the marks, which would otherwise excuse
// missing rows or changed values. A role that may not set them (not the
// database's owner) gets a warning: the copy is complete either way.
func (f *finishStage) markSubset(ctx context.Context) error {
	if f.m.Subset == nil && f.m.Mask == nil && !f.clean {
		return nil
	}
	var subset, masked string
	if f.m.Subset != nil {
		subset = f.m.Subset.Describe()
	}
	if f.m.Mask != nil {
		b, err := json.Marshal(f.m.Mask)
		if err != nil {
			return fmt.Errorf("record the masking: %w", err)
		}
		masked = string(b)
	}
	conn, err := pg.Connect(ctx, f.target.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, mark := range []struct{ setting, value, what string }{
		{pg.SubsetSetting, subset, "a subset; compare will report its tables as different"},
		{pg.MaskSetting, masked, "masked; compare will report its masked tables as different"},
	} {
		var db string
		var old *string
		if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_database(), pg_catalog.current_setting($1, true)", mark.setting).Scan(&db, &old); err != nil {
			return fmt.Errorf("record the development copy: %w", err)
		}
		q := fmt.Sprintf("ALTER DATABASE %s RESET %s", pg.Ident(db), mark.setting)
		switch {
		case mark.value != "":
			q = fmt.Sprintf("ALTER DATABASE %s SET %s = %s", pg.Ident(db), mark.setting, pg.Literal(mark.value))
		case old == nil || *old == "":
			continue
		}
		if _, err := conn.Exec(ctx, q); err != nil {
			if ctx.Err() != nil {
				return err
			}
			if f.log != nil {
				f.log.Warn("could not record in the target that it is "+mark.what, "error", err)
			}
		}
	}
	return nil
}

// refreshMatviews fills the materialized views that were populated in the
// source, in creation order so that one built on another comes after it.
func (f *finishStage) refreshMatviews(ctx context.Context) error {
	stmts := make([]targetStatement, len(f.m.Matviews))
	for i, mv := range f.m.Matviews {
		name := pg.Qualified(mv.Schema, mv.Name)
		stmts[i] = targetStatement{"refresh materialized view " + name, "REFRESH MATERIALIZED VIEW " + name}
	}
	return f.target.execEach(ctx, stmts)
}
