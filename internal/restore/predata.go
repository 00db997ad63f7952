package restore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/journal"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// target is the database the restore works in, as the pre-data stage
// leaves it: its schema created (or an earlier run's found), and its
// journal open. The data, post-data and finish stages are built from it.
type target struct {
	cfg     *pgx.ConnConfig  // the database restored into: the created one with --create
	j       *journal.Journal // the target's journal of finished steps
	resumed int              // steps an earlier, interrupted run had finished
}

// targetStatement is one statement execEach runs, with what it does for
// its error.
type targetStatement struct{ what, sql string }

// execEach runs stmts one after the other on one new connection to the
// target (none when there are none): the finishing touches of a stage,
// setval and REFRESH MATERIALIZED VIEW, each failure naming its object.
func (t *target) execEach(ctx context.Context, stmts []targetStatement) error {
	if len(stmts) == 0 {
		return nil
	}
	conn, err := pg.Connect(ctx, t.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s.sql); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// preData is the pre-data stage: it prepares the target, opens the
// journal and creates the schema's pre-data objects, unless an earlier
// run of a resumed restore finished them.
type preData struct {
	opts   Options
	m      *archive.Manifest // the selection's
	sel    *selection
	schema *schemaArchive
	log    *slog.Logger
	// kg, with --keep-going or on resume, is where pre-data records what
	// it could not create (keepGoing); nil stops at the first error.
	kg *keepGoing

	target   *pgx.ConnConfig
	j        *journal.Journal
	resumed  int
	encoding string // the target's server_encoding, once connected (explain)
}

// run is the pre-data stage.
func (p *preData) run(ctx context.Context) (*target, error) {
	if err := p.prepare(ctx); err != nil {
		return nil, err
	}
	return &target{cfg: p.target, j: p.j, resumed: p.resumed}, nil
}

// prepare does the pre-data stage's work, leaving its results in p.
func (p *preData) prepare(ctx context.Context) error {
	p.target = p.opts.Target
	id := journal.ArchiveID(p.m)
	if p.opts.Create {
		return p.create(ctx, id)
	}
	conn, err := pg.Connect(ctx, p.target)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	p.encoding = conn.PgConn().ParameterStatus("server_encoding")
	if err := Encoding(ctx, conn, p.m); err != nil {
		return err
	}
	found, err := journal.Read(ctx, conn)
	if err != nil {
		return err
	}
	if err := p.checkJournal(found.ID(), id); err != nil {
		return err
	}
	if found != nil && p.opts.Resume {
		if found, err = p.rereadJournal(ctx, conn, id); err != nil {
			return err
		}
		p.j = found
		p.resumed = found.Finished()
		if found.IsDone(journal.StepPreData) {
			p.log.Info("resuming", "archive", id, "steps done", p.resumed)
			return p.resumeKeepGoing(ctx, conn, p.target)
		}
		// Pre-data (pg_restore, one transaction per object) was cut short.
		// The journal was created right after the target was found to
		// hold none of the objects this restore creates (or --clean
		// dropped them), so whatever of them it holds now, this restore
		// created: drop them and start pre-data again. A journal that
		// cannot vouch for that check drops nothing.
		if !found.IsDone(journal.StepChecked) {
			return fmt.Errorf("target database %q holds an unfinished restore whose pre-data was interrupted, and its journal does not record that the target held none of the archive's objects when it began (an older pgsprint checked only tables): --resume will not drop objects that may be yours; use --clean to replace them, or restore into an empty database", p.target.Database)
		}
		p.log.Info("resuming: pre-data was interrupted, dropping what it created")
		if err := p.dropArchivedObjects(ctx); err != nil {
			return err
		}
	} else {
		if found != nil { // --clean without --resume: start over
			if err := found.Discard(ctx, conn); err != nil {
				return err
			}
		}
		switch {
		case p.sel.dataOnly:
			if err := DataTargets(ctx, conn, p.m.Tables); err != nil {
				return err
			}
		case p.opts.Clean:
			if err := p.dropArchivedObjects(ctx); err != nil {
				return err
			}
		case p.sel.list != "":
			if err := p.sel.refuseExisting(ctx, p.target); err != nil {
				return err
			}
		default:
			if err := Empty(ctx, conn, p.target.Database); err != nil {
				return err
			}
		}
		// Refused before anything is created, as preflight refuses it.
		if err := CanCreate(ctx, conn, p.m, p.sel.dataOnly); err != nil {
			return err
		}
		if p.j, err = journal.Create(ctx, conn, id, p.savedManifest(), journal.StepChecked); err != nil {
			return err
		}
	}
	if p.sel.dataOnly {
		return p.j.Record(ctx, conn, journal.StepPreData)
	}
	if err := p.restoreSchema(ctx, p.target, nil); err != nil {
		return err
	}
	return p.recordPreData(ctx, conn)
}

// recordPreData records pre-data as done in the journal, with what a
// --keep-going run could not create of it (keepGoing.preDataSteps), in
// one statement.
func (p *preData) recordPreData(ctx context.Context, conn *pgx.Conn) error {
	steps := []string{journal.StepPreData}
	if p.kg != nil && p.kg.entries != nil {
		steps = append(steps, p.kg.preDataSteps()...)
	}
	if _, err := conn.Exec(ctx, p.j.RecordSQL(steps...)); err != nil {
		return fmt.Errorf("record pre-data in the restore journal: %w", err)
	}
	return nil
}

// resumeKeepGoing finishes, on resume, the pre-data entries an earlier
// --keep-going run could not create (or created without their owner or
// tablespace), recording what it finished and what is still missing; a
// journal without such entries needs nothing, and the restore goes on as
// an ordinary resume.
func (p *preData) resumeKeepGoing(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig) error {
	if p.kg == nil || (len(left(p.j, stepMissing)) == 0 && len(left(p.j, stepPartial)) == 0) {
		return nil
	}
	if err := p.kg.loadTOC(ctx, p.schema, p.sel); err != nil {
		return err
	}
	if err := p.kg.resumePreData(ctx, p.schema, cfg, p.j); err != nil {
		return err
	}
	// Entries still missing stay so; those depending on them too.
	for _, id := range left(p.j, stepMissing) {
		if _, ok := p.kg.failed[id]; !ok && !p.kg.retried[id] {
			if _, ok := p.kg.skipped[id]; !ok {
				p.kg.failed[id] = "not created by the earlier run (see its report)"
			}
		}
	}
	p.kg.classify()
	var steps []string
	for _, s := range p.kg.preDataSteps() {
		if !p.j.IsDone(s) {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return nil
	}
	if _, err := conn.Exec(ctx, p.j.RecordSQL(steps...)); err != nil {
		return fmt.Errorf("record pre-data in the restore journal: %w", err)
	}
	return nil
}

// create is pre-data with --create: pg_restore creates the archived
// database, and the journal is created in it once pre-data is done, so a
// journal there always means pre-data finished. A database interrupted
// before that holds no journal and is refused on resume.
func (p *preData) create(ctx context.Context, id string) error {
	created := p.opts.Target.Copy()
	created.Database = p.m.Database
	if !p.opts.Clean || p.opts.Resume {
		conn, err := pg.Connect(ctx, created)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "3D000": // no such database: a fresh restore
		case err != nil:
			return err
		default:
			defer conn.Close(context.WithoutCancel(ctx))
			p.target = created
			found, err := journal.Read(ctx, conn)
			if err != nil {
				return err
			}
			if err := p.checkJournal(found.ID(), id); err != nil {
				return err
			}
			if p.opts.Resume {
				if found == nil {
					return fmt.Errorf("database %q exists but holds no pgsprint journal: it was not created by an interrupted restore of this archive, or that restore stopped before pre-data finished; use --clean --create without --resume to start over", created.Database)
				}
				if found, err = p.rereadJournal(ctx, conn, id); err != nil {
					return err
				}
				p.j = found
				p.resumed = found.Finished()
				return p.resumeKeepGoing(ctx, conn, created)
			}
			p.target = p.opts.Target
		}
	}
	via, dropVia, err := p.createVia(ctx)
	if err != nil {
		return err
	}
	defer dropVia()
	if via == p.opts.Target {
		if err := p.restoreSchema(ctx, via, created); err != nil {
			return err
		}
	} else {
		if err := p.createConverted(ctx, via, created); err != nil {
			return err
		}
		// The database and its own entries are in: the rest as into
		// an existing database.
		saved := p.opts
		p.opts.Create, p.opts.Clean = false, false
		err := p.restoreSchema(ctx, created, nil)
		p.opts = saved
		if err != nil {
			return err
		}
	}
	p.target = created
	conn, err := pg.Connect(ctx, created)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	steps := []string{journal.StepPreData}
	if p.kg != nil && p.kg.entries != nil {
		steps = append(steps, p.kg.preDataSteps()...)
	}
	p.j, err = journal.Create(ctx, conn, id, p.savedManifest(), steps...)
	return err
}

// savedManifest is the manifest the journal keeps: a clone's
// (Options.SaveManifest), and none for a restore, which reads it from its
// archive again: with 100,000 tables it is 25 MB of JSON, written to the
// target and held twice while it is sent.
func (p *preData) savedManifest() *archive.Manifest {
	if !p.opts.SaveManifest {
		return nil
	}
	return p.m
}

// rereadJournal waits for the sessions of the interrupted run to end
// (journal.WaitForOrphans), then reads the journal again: a killed pgsprint's
// backend goes on with the query it was sent, and a task's query is its
// whole transaction, journal row and COMMIT included (engine.inTx), so
// steps may have been committed since the journal was first read.
func (p *preData) rereadJournal(ctx context.Context, conn *pgx.Conn, id string) (*journal.Journal, error) {
	if err := journal.WaitForOrphans(ctx, conn, journal.ThisDatabase, p.log); err != nil {
		return nil, err
	}
	found, err := journal.Read(ctx, conn)
	if err != nil {
		return nil, err
	}
	if found == nil {
		return nil, fmt.Errorf("the restore journal in target database %q went away while waiting for the interrupted run's sessions to end: is another pgsprint at work there?", p.target.Database)
	}
	return found, p.checkJournal(found.ID(), id)
}

func cleanFlag(clean bool) string {
	if clean {
		return "--clean"
	}
	return ""
}

// checkJournal decides what an existing journal means for this run
// (Journal): found is the ID of the journal in the target (""
// when there is none), id this run's.
func (p *preData) checkJournal(found, id string) error {
	return Journal(found, id, p.opts.Resume, p.opts.Clean, p.target.Database)
}

// dropArchivedObjects runs the DROP ... IF EXISTS statements pg_restore
// --clean would issue for every object in the archive, in its reverse
// dependency order, and nothing else. pg_restore cannot drop without also
// creating, so its script is cut before the first object it creates.
//
// Like pg_restore --clean, a failing DROP does not stop the others: some
// fail harmlessly (a partition's inherited constraint goes with its
// parent's). Whatever really remains makes the strict pre-data step fail
// with "already exists", which names the object.
func (p *preData) dropArchivedObjects(ctx context.Context) error {
	args := []string{"--clean", "--if-exists", "--file=-"}
	if l := p.sel.useList(); l != "" {
		args = append(args, l)
	}
	out, err := p.schema.pgRestoreCmd(ctx, append(args, p.schema.file)...).Output()
	if err != nil {
		return fmt.Errorf("pg_restore --clean: %w", pg.ToolFailure(err))
	}
	if i := bytes.Index(out, []byte("\n--\n-- Name: ")); i >= 0 {
		out = out[:i+1]
	}
	dsn, env := pg.ChildConn(p.target)
	args = []string{"--no-psqlrc", "--quiet", "--no-password", "--dbname=" + dsn}
	partial := p.sel.list != ""
	if partial {
		// Dropping part of a database the user goes on using is all or
		// nothing: a table that cannot go (a view of another depends on
		// it) must not lose its sequence or default on the way.
		args = append(args, "--single-transaction", "--set=ON_ERROR_STOP=1")
	}
	cmd := p.schema.command(ctx, p.schema.tools.Psql(), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(out)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	switch {
	case err != nil && partial && ctx.Err() == nil:
		return fmt.Errorf("--clean could not drop the selected objects (target database %q is unchanged): %s", p.target.Database, firstError(stderr.String()))
	case err != nil:
		return fmt.Errorf("drop existing objects: %s", pg.ToolError(stderr.Bytes(), err))
	case stderr.Len() > 0:
		p.log.Debug("some drops failed; pre-data will report what remains", "psql", stderr.String())
	}
	return nil
}

// firstError is the first ERROR of psql's complaints, with its DETAIL
// (which names the objects in the way), on one line.
func firstError(stderr string) string {
	var msg string
	for _, l := range strings.Split(stderr, "\n") {
		switch i, j := strings.Index(l, "ERROR:"), strings.Index(l, "DETAIL:"); {
		case msg == "" && i >= 0:
			msg = strings.TrimSpace(l[i+len("ERROR:"):])
		case msg != "" && j >= 0:
			return msg + " (" + strings.TrimSpace(l[j+len("DETAIL:"):]) + ")"
		case msg != "" && (i >= 0 || strings.HasPrefix(l, "psql:")):
			return msg
		}
	}
	return msg
}
