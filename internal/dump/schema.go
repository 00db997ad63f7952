package dump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// Schema writes `pg_dump --schema-only -Fc` of the session's snapshot to
// w. pg_dump is the authority on DDL for every object kind. It locks every
// table it dumps (ACCESS SHARE) from its start to its end, as pg_dump -Fc
// would, waiting for them no longer than the user's --lock-wait-timeout:
// the leader holds no lock, so what pg_dump waits for is another session's
// DDL, which waits for no one of this run but a reader in the middle of
// that table's COPY, and goes ahead when that COPY ends.
//
// The schema is written in UTF8, the encoding of the manifest's names and
// of every pgsprint connection, so that the SQL a restore runs and the
// names it adds to it agree (pg_dump's default, the server's encoding or
// PGCLIENTENCODING, would not); a SQL_ASCII source's bytes stay as stored.
//
// A new session started pg_dump beside its catalog queries (earlySchema):
// Schema then waits for it and copies what it wrote.
func (s *Session) Schema(ctx context.Context, w io.Writer) error {
	var err error
	if s.early != nil {
		err = s.early.writeTo(ctx, w)
	} else {
		err = s.runPgDump(ctx, w, int64(len(s.pgDumpLocks())))
	}
	return s.explainLockTimeout(ctx, err)
}

// lockTimeoutError is pg_dump's failure to lock a table within
// --lock-wait-timeout, before Schema names whoever is in the way.
type lockTimeoutError struct{ err error }

func (e *lockTimeoutError) Error() string { return e.err.Error() }
func (e *lockTimeoutError) Unwrap() error { return e.err }

// explainLockTimeout names the session in the way of a pg_dump that could
// not lock a table in time, if it still is. It runs in Schema's caller,
// never beside Begin: the early pg_dump may fail while the leader still
// reads the catalog (a connection serves one query at a time) and before
// the manifest, which lists the tables pg_dump locks, exists.
func (s *Session) explainLockTimeout(ctx context.Context, err error) error {
	var lt *lockTimeoutError
	if !errors.As(err, &lt) || s.Manifest == nil || ctx.Err() != nil {
		return err
	}
	if conflict := pg.Blocked(ctx, s.leader, s.pgDumpLocks()); conflict.Blocker != nil {
		return fmt.Errorf("pg_dump --schema-only: could not lock a table within --lock-wait-timeout (%s): %w", s.lockWait, conflict)
	}
	return err
}

// runPgDump runs pg_dump --schema-only in the session's snapshot, writing
// its custom archive to w, once the locks of its tables (how many it will
// lock) fit in the run's lock budget.
func (s *Session) runPgDump(ctx context.Context, w io.Writer, tables int64) error {
	release, err := s.locks.acquire(ctx, tables)
	if err != nil {
		return err
	}
	defer release()
	dsn, env := pg.ChildConn(s.source)
	enc := "UTF8"
	if s.srv.Encoding == "SQL_ASCII" {
		enc = "SQL_ASCII"
	}
	args := append(s.schemaArgs(), "--format=custom", "--no-password", "--encoding="+enc)
	if s.lockWait != "" {
		args = append(args, "--lock-wait-timeout="+s.lockWait)
	}
	args = append(append(args, "--snapshot="+s.snap.ID, "--dbname="+dsn), s.filter.PgDumpArgs()...)
	cmd := pgbin.Command(ctx, s.tools.PgDump(), args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stdout = w
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lockFailed := bytes.Contains(stderr.Bytes(), []byte("LOCK TABLE"))
		if lockFailed && bytes.Contains(stderr.Bytes(), []byte("does not exist")) {
			// As for pg_dump -Fc: a table dropped (or renamed) between
			// the snapshot and pg_dump's lock.
			return fmt.Errorf("pg_dump --schema-only: a table was dropped or renamed by another session after the snapshot was taken, before pg_dump could lock it (%s): run again", pg.ToolError(stderr.Bytes(), err))
		}
		err := fmt.Errorf("pg_dump --schema-only: %s", pg.ToolError(stderr.Bytes(), err))
		if lockFailed {
			// --lock-wait-timeout expired: Schema names whoever is in
			// the way, if they still are.
			return &lockTimeoutError{err}
		}
		return err
	}
	return nil
}

// pgDumpLocks names (quoted, qualified) the tables pg_dump locks: those
// whose rows are read, and the other tables it dumps (partitioned
// parents, tables whose data is excluded).
func (s *Session) pgDumpLocks() []string {
	var names []string
	for _, o := range s.Manifest.Relations {
		if o.Kind == "r" || o.Kind == "p" {
			names = append(names, pg.Qualified(o.Schema, o.Name))
		}
	}
	if len(names) == 0 { // a plan saved before relations were recorded
		for _, t := range s.Manifest.Tables {
			names = append(names, pg.Qualified(t.Schema, t.Name))
		}
	}
	return names
}

// schemaArgs selects what pg_dump writes: the schema, and with pg_dump 18
// or later the optimizer statistics too (STATISTICS DATA entries: tables'
// in the data section, indexes' in post-data), which pg_dump leaves out of
// --schema-only; --no-data --statistics is the schema plus statistics,
// without table data, sequence values or large objects, which pgsprint
// carries itself. A --schema-only or --data-only dump carries none, as
// pg_dump's; --no-data and --no-schema keep them (filter.Statistics), and
// --statistics-only is pg_dump's own (CheckPgDump refused it before 18).
func (s *Session) schemaArgs() []string {
	switch {
	case s.filter.StatisticsOnly:
		return []string{"--statistics-only"}
	case s.tools.Major < 18 || s.noStat || !s.filter.Statistics():
		return []string{"--schema-only"}
	}
	return []string{"--no-data", "--statistics"}
}

// dumpSchema streams the session's schema into the archive's schema stream.
func dumpSchema(ctx context.Context, sess *Session, s *archive.StreamWriter, blockSize int) error {
	bw := archive.NewBlockWriter(s, blockSize)
	if err := sess.Schema(ctx, bw); err != nil {
		return err
	}
	if err := bw.Close(); err != nil {
		return fmt.Errorf("write schema: %w", err)
	}
	return nil
}
