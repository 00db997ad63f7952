// Package journal is the table in a restore's or a clone's target that
// makes --resume possible: every step of the work commits together with
// its row here, so a run killed at any point can be finished by skipping
// the steps the journal lists and redoing the others. The journal lives
// in the target (schema pgsprint_journal) rather than in a local state
// file so that a step and its row commit in one transaction; it is
// dropped when the restore completes, so that the target's schema equals
// the source's. Restore and clone use it only through this package.
package journal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
)

// Schema is the schema in the target that holds the journal of
// finished steps while a restore runs. It lives in the target (not in a
// local state file) so that recording a step commits in the same
// transaction as the step itself; it is dropped when the restore completes,
// so that the target's schema equals the source's.
const Schema = "pgsprint_journal"

// journalTable is the qualified journal table, pg.Qualified(Schema, "steps").
const journalTable = `"` + Schema + `"."steps"`

// planTable holds the manifest the journal's steps refer to, as JSON, so
// that a clone (whose plan is made live and would come out different
// under concurrent writes) can be resumed with the very same plan.
const planTable = `"` + Schema + `"."plan"`

// stepBegin is the row written with the journal itself: it names the
// archive even before any other step is done. StepChecked, written with it,
// says that the target held none of the objects this restore creates when
// the journal was made (checked, or dropped by --clean): so every archived
// object found in the target later is this restore's own, and a resume may
// drop what an interrupted pre-data left. A journal without it (an older
// pgsprint's, whose check counted only tables) cannot vouch for that.
// StepPreData says that pre-data (pg_restore's objects) is in.
const (
	stepBegin   = "begin"
	StepChecked = "target checked"
	StepPreData = "pre-data"
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

// Journal is the state of the target's journal for one restore: which
// archive it belongs to and the steps earlier runs finished. Steps finished
// by this run are not added: no task runs twice within one run.
type Journal struct {
	id   string
	done map[string]bool
}

// ID is the identity (ArchiveID, never empty) of the archive or clone
// plan whose steps the journal records; "" for a nil journal (none found).
func (j *Journal) ID() string {
	if j == nil {
		return ""
	}
	return j.id
}

// Finished is how many steps of the restore's work earlier runs finished
// (the journal's own rows not counted).
func (j *Journal) Finished() int {
	n := len(j.done) - 1
	if j.done[StepChecked] {
		n--
	}
	return n
}

// IsDone reports whether an earlier run finished step; a nil journal has
// none finished.
func (j *Journal) IsDone(step string) bool {
	return j != nil && step != "" && j.done[step]
}

// Execer is a connection or a transaction: where a step's row is written.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Record writes step into the journal on x, which must be the transaction
// that did the step's work: the row commits if and only if the work does.
// The primary key makes a second commit of one step fail, and roll back its
// work, should one ever be attempted.
func (j *Journal) Record(ctx context.Context, x Execer, step string) error {
	if _, err := x.Exec(ctx, j.RecordSQL(step)); err != nil {
		return fmt.Errorf("record step %q in the restore journal: %w", step, err)
	}
	return nil
}

// RecordSQL is the statement that records one or more steps, for scripts
// run by psql and multi-statement queries: they must run it in the
// transaction of the steps' work, as Record. Several steps are one
// multi-row INSERT: a small table's load and the tasks fused into it
// record five steps in one statement.
func (j *Journal) RecordSQL(steps ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s (archive, step) VALUES ", journalTable)
	for i, step := range steps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %s)", pg.Literal(j.id), pg.Literal(step))
	}
	return b.String()
}

// Read returns the journal found in conn's database, or nil if there is
// none.
func Read(ctx context.Context, conn *pgx.Conn) (*Journal, error) {
	var exists, schema bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL, EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $2)",
		journalTable, Schema).Scan(&exists, &schema); err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	switch {
	case !exists && schema:
		// Not ours: refused before anything is dropped or created, as
		// creating the journal would fail once --clean had dropped.
		return nil, fmt.Errorf("the target database holds a schema %s that is not a pgsprint journal (pgsprint keeps its restore journal under that name): rename or drop it, then restore again", pg.Ident(Schema))
	case !exists:
		return nil, nil
	}
	rows, err := conn.Query(ctx, "SELECT archive, step FROM "+journalTable)
	if err != nil {
		return nil, fmt.Errorf("read restore journal: %w", err)
	}
	j := &Journal{done: map[string]bool{}}
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
		return nil, fmt.Errorf("read restore journal: %s exists but has no %q row; drop schema %s and restore with --clean", journalTable, stepBegin, pg.Ident(Schema))
	}
	return j, nil
}

// Create creates the journal for archive id in one transaction, with the
// manifest m (when not nil: what ReadManifest gives a resumed clone) and
// the steps already done (StepChecked, or StepPreData for --create).
func Create(ctx context.Context, conn *pgx.Conn, id string, m *archive.Manifest, steps ...string) (*Journal, error) {
	j := &Journal{id: id, done: map[string]bool{}}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pg.Ident(Schema)); err != nil {
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
			if err := j.Record(ctx, tx, s); err != nil {
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

// ReadManifest returns the manifest saved with the journal of an
// unfinished restore or clone in the target, or nil if the target holds no
// journal. Clone --resume plans nothing: it takes this manifest, whose
// ArchiveID is the journal's, so that every step the journal lists names
// the same stream, index or constraint as before.
func ReadManifest(ctx context.Context, target *pgx.ConnConfig) (*archive.Manifest, error) {
	conn, err := pg.Connect(ctx, target)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	j, err := Read(ctx, conn)
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

// Discard drops the journal j found in conn's database, with its steps:
// the restore starts over (--clean without --resume).
func (j *Journal) Discard(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pg.Ident(Schema)+" CASCADE"); err != nil {
		return fmt.Errorf("drop restore journal: %w", err)
	}
	return nil
}

// Drop removes the journal from cfg's database: the restore is complete,
// and the journal is the one object the source does not have.
func Drop(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pg.Ident(Schema)+" CASCADE"); err != nil {
		return fmt.Errorf("drop restore journal: %w", err)
	}
	return nil
}

// Steps are the steps earlier runs recorded that begin with prefix, in no
// particular order: a --keep-going restore records what it could not do
// under a prefix of its own, for the resume that finishes it.
func (j *Journal) Steps(prefix string) []string {
	if j == nil {
		return nil
	}
	var out []string
	for s := range j.done {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}
