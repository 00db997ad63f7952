package restore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// JournalSchema is the schema in the target that holds the journal of
// finished steps while a restore runs. It lives in the target (not in a
// local state file) so that recording a step commits in the same
// transaction as the step itself; it is dropped when the restore completes,
// so that the target's schema equals the source's.
const JournalSchema = "pgsprint_journal"

// journalTable is the qualified journal table, pg.Qualified(JournalSchema, "steps").
const journalTable = `"` + JournalSchema + `"."steps"`

// planTable holds the manifest the journal's steps refer to, as JSON, so
// that a clone (whose plan is made live and would come out different
// under concurrent writes) can be resumed with the very same plan.
const planTable = `"` + JournalSchema + `"."plan"`

// stepBegin is the row written with the journal itself: it names the
// archive even before any other step is done. stepChecked, written with it,
// says that the target held none of the objects this restore creates when
// the journal was made (checked, or dropped by --clean): so every archived
// object found in the target later is this restore's own, and a resume may
// drop what an interrupted pre-data left. A journal without it (an older
// pgsprint's, whose check counted only tables) cannot vouch for that.
const (
	stepBegin   = "begin"
	stepChecked = "target checked"
	stepPreData = "pre-data"
)

// ArchiveID identifies an archive for the journal: the snapshot it was
// dumped in and a hash of its manifest (which lists every table, chunk and
// stream), so that a resume never mixes the rows of two archives. A clone
// would pass the identity of its own plan and snapshot.
func ArchiveID(m *archive.Manifest) string {
	b, _, _ := archive.MarshalManifest(m) // a struct of plain fields: cannot fail
	sum := sha256.Sum256(b)
	return m.Snapshot + "/" + hex.EncodeToString(sum[:8])
}

// journal is the state of the target's journal for one restore: which
// archive it belongs to and the steps earlier runs finished. Steps finished
// by this run are not added: no task runs twice within one run.
type journal struct {
	id   string
	done map[string]bool
}

// finished is how many steps of the restore's work earlier runs finished
// (the journal's own rows not counted).
func (j *journal) finished() int {
	n := len(j.done) - 1
	if j.done[stepChecked] {
		n--
	}
	return n
}

// isDone reports whether an earlier run finished step.
func (j *journal) isDone(step string) bool {
	return j != nil && step != "" && j.done[step]
}

// execer is a connection or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// record writes step into the journal on x, which must be the transaction
// that did the step's work: the row commits if and only if the work does.
// The primary key makes a second commit of one step fail, and roll back its
// work, should one ever be attempted.
func (j *journal) record(ctx context.Context, x execer, step string) error {
	if _, err := x.Exec(ctx, j.recordSQL(step)); err != nil {
		return fmt.Errorf("record step %q in the restore journal: %w", step, err)
	}
	return nil
}

// recordSQL is the statement that records step, for scripts run by psql.
func (j *journal) recordSQL(step string) string {
	return fmt.Sprintf("INSERT INTO %s (archive, step) VALUES (%s, %s)", journalTable, pg.Literal(j.id), pg.Literal(step))
}

// readJournal returns the journal found in the target, or nil if there is
// none.
func readJournal(ctx context.Context, conn *pgx.Conn) (*journal, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", journalTable).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := conn.Query(ctx, "SELECT archive, step FROM "+journalTable)
	if err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	j := &journal{done: map[string]bool{}}
	var id, step string
	_, err = pgx.ForEachRow(rows, []any{&id, &step}, func() error {
		if j.id != "" && id != j.id {
			return fmt.Errorf("it names two archives (%s and %s)", j.id, id)
		}
		j.id = id
		j.done[step] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	if !j.done[stepBegin] {
		return nil, fmt.Errorf("read restore journal: %s exists but has no %q row; drop schema %s and restore with --clean", journalTable, stepBegin, pg.Ident(JournalSchema))
	}
	return j, nil
}

// createJournal creates the journal for archive id in one transaction, with
// the manifest m (when not nil) and the steps already done (pre-data, for
// --create).
func createJournal(ctx context.Context, conn *pgx.Conn, id string, m *archive.Manifest, steps ...string) (*journal, error) {
	j := &journal{id: id, done: map[string]bool{}}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pg.Ident(JournalSchema)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+journalTable+
			" (archive text NOT NULL, step text NOT NULL, finished timestamptz NOT NULL DEFAULT pg_catalog.now(), PRIMARY KEY (archive, step))"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+planTable+" (archive text PRIMARY KEY, manifest text NOT NULL)"); err != nil {
			return err
		}
		if m != nil {
			b, _, err := archive.MarshalManifest(m)
			if err != nil {
				return err
			}
			// ASCII, so that a target of any encoding stores it.
			if _, err := tx.Exec(ctx, "INSERT INTO "+planTable+" (archive, manifest) VALUES ($1, $2)", id, string(archive.ASCIIJSON(b))); err != nil {
				return err
			}
		}
		for _, s := range append([]string{stepBegin}, steps...) {
			if err := j.record(ctx, tx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create restore journal %s: %w", journalTable, err)
	}
	return j, nil
}

// ReadJournalManifest returns the manifest saved with the journal of an
// unfinished restore or clone in the target, or nil if the target holds no
// journal. Clone --resume plans nothing: it takes this manifest, whose
// ArchiveID is the journal's, so that every step the journal lists names
// the same stream, index or constraint as before.
func ReadJournalManifest(ctx context.Context, target *pgx.ConnConfig) (*archive.Manifest, error) {
	conn, err := pg.Connect(ctx, target)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	j, err := readJournal(ctx, conn)
	if err != nil || j == nil {
		return nil, err
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", planTable).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	var text string
	if exists {
		err = conn.QueryRow(ctx, "SELECT manifest FROM "+planTable+" WHERE archive = $1", j.id).Scan(&text)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("read restore journal: %w", err)
		}
	}
	if text == "" {
		return nil, fmt.Errorf("target database %q holds an unfinished restore (journal %s) with no saved plan: it cannot be resumed as a clone; clone again with --clean", target.Database, j.id)
	}
	m, err := archive.UnmarshalManifest([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("read restore journal: saved plan: %w", err)
	}
	if got := ArchiveID(m); got != j.id {
		return nil, fmt.Errorf("read restore journal: the saved plan is %s but the journal names %s; clone again with --clean", got, j.id)
	}
	return m, nil
}

// dropJournal removes the journal: the restore is complete.
func dropJournal(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pg.Ident(JournalSchema)+" CASCADE"); err != nil {
		return fmt.Errorf("drop restore journal: %w", err)
	}
	return nil
}

// checkJournal decides what an existing journal means for this run.
func (r *run) checkJournal(found *journal, id string) error {
	switch {
	case found == nil:
		return nil
	case !r.opts.Resume && !r.opts.Clean:
		return fmt.Errorf("target database %q holds an unfinished pgsprint restore or clone (schema %s): use --resume to finish it (a clone with the --snapshot it read), or --clean to start over",
			r.target.Database, pg.Ident(JournalSchema))
	case r.opts.Resume && found.id != id:
		return fmt.Errorf("target database %q holds an unfinished restore of another archive (%s, this one is %s): resume with that archive, or use --clean without --resume to start over",
			r.target.Database, found.id, id)
	}
	return nil
}

// waitForOrphans waits until no session of an interrupted run is still
// working in the target. A killed pgsprint leaves its server backends
// running their last statement (a CREATE INDEX can take minutes); each ends
// by rolling back once it finds its client gone, but until then it holds
// locks, and a resumed run must not race it.
func waitForOrphans(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	const q = `SELECT count(*) FROM pg_catalog.pg_stat_activity
		WHERE datname = pg_catalog.current_database() AND pid <> pg_catalog.pg_backend_pid()
		AND application_name IN ('pgsprint', 'pg_restore', 'psql') AND state IS DISTINCT FROM 'idle'`
	deadline := time.Now().Add(10 * time.Minute)
	logged := false
	for {
		var n int
		if err := conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("look for sessions of the interrupted restore: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("sessions of the interrupted restore (or another pgsprint) are still busy in the target after 10 minutes; is another restore running?")
		}
		if !logged {
			log.Info("waiting for sessions of the interrupted restore to end", "sessions", n)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// resetPartialTables empties, on resume, every table loaded by one
// whole-table chunk that the journal does not list but that holds rows: an
// interrupted split load commits its parts one by one, so the rows of some
// parts may be in. Chunks that are ranges of a table are never split and
// load in one transaction each, so they never leave rows behind. (A chunk
// loaded with TRUNCATE + COPY FREEZE would wipe such rows itself, but
// whether a chunk is split depends on -j, which may differ between runs.)
func (r *run) resetPartialTables(ctx context.Context) error {
	if r.res.Resumed == 0 {
		return nil
	}
	conn, err := pg.Connect(ctx, r.target)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for i := range r.m.Chunks {
		c := &r.m.Chunks[i]
		if c.Where != "" || r.j.isDone(chunkStep(c.Stream)) {
			continue
		}
		name := r.tableName(c)
		var any bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM ONLY "+name+")").Scan(&any); err != nil {
			return fmt.Errorf("resume: look into %s: %w", name, err)
		}
		if !any {
			continue
		}
		r.log.Info("resuming: emptying a partly loaded table", "table", name)
		_, err := conn.Exec(ctx, "TRUNCATE ONLY "+name)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // not the owner: no TRUNCATE privilege
			_, err = conn.Exec(ctx, "DELETE FROM ONLY "+name)
		}
		if err != nil {
			return fmt.Errorf("resume: empty partly loaded table %s: %w", name, err)
		}
	}
	return nil
}
