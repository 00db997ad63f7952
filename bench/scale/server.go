package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/bench/benchkit"
	"github.com/pgsprint/pgsprint/internal/pgtest"
)

// server is where the datasets live and the restores land: a throwaway
// cluster started for the run, or a server the user points -dsn at.
type server interface {
	ConnString(db string) string
	Exec(ctx context.Context, db, sql string) error
	BinDir() string
}

// external is a running server named by a keyword connection string.
type external struct {
	dsn, binDir string
}

// ConnString is the user's string with dbname set last, which libpq and
// pgx read as overriding an earlier one.
func (e external) ConnString(db string) string {
	return e.dsn + " dbname=" + pgtest.QuoteConnValue(db)
}

func (e external) BinDir() string { return e.binDir }

func (e external) Exec(ctx context.Context, db, sql string) error {
	conn, err := pgx.Connect(ctx, e.ConnString(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// env is one run's server, binaries, scratch directory and S3 server.
type env struct {
	cfg      config
	srv      versioned
	pgsprint string
	self     string // this program, for the raw limit's process
	pgcopydb string // empty when not installed
	s3       *benchkit.S3Server
	s3Skip   string
	work     string
	// traceDir is where -trace writes its raw samples, "" for nowhere
	// (a temporary work directory that goes at the end).
	traceDir string
	cleanup  []func()
}

// versioned is a server that can say which PostgreSQL it is.
type versioned struct {
	server
}

// Version is the server's version() string, shortened.
func (v versioned) Version(ctx context.Context) string {
	conn, err := pgx.Connect(ctx, v.ConnString("postgres"))
	if err != nil {
		return "PostgreSQL ?"
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s string
	if err := conn.QueryRow(ctx, "SELECT split_part(version(), ' on ', 1)").Scan(&s); err != nil {
		return "PostgreSQL ?"
	}
	return s
}

func setUp(ctx context.Context, c config) (e *env, err error) {
	e = &env{cfg: c}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if e.work = c.workDir; e.work == "" {
		if e.work, err = os.MkdirTemp("", "pgsprint-bench-scale-*"); err != nil {
			return e, err
		}
		e.cleanup = append(e.cleanup, func() { os.RemoveAll(e.work) })
	}
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		return e, err
	}
	// The server's OS user writes pg_dump -Fd and pgcopydb files here too.
	if err := os.Chmod(e.work, 0o777); err != nil {
		return e, err
	}
	if e.cfg.out == "" {
		e.cfg.out = e.work
	} else if err := os.MkdirAll(e.cfg.out, 0o755); err != nil {
		return e, err
	}
	switch {
	case c.trace.String() == "":
	case c.out != "" || c.workDir != "":
		e.traceDir = e.cfg.out
	case c.keep:
		if e.traceDir, err = os.MkdirTemp("", "pgsprint-bench-trace-*"); err != nil {
			return e, err
		}
		fmt.Fprintf(os.Stderr, "trace samples: %s\n", e.traceDir)
	}
	bin, err := pgtest.FindBinDir(c.binDir)
	if err != nil {
		return e, err
	}
	if e.self, err = os.Executable(); err != nil {
		return e, err
	}
	if e.pgsprint = c.pgsprint; e.pgsprint == "" {
		e.pgsprint = filepath.Join(e.work, "pgsprint")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", e.pgsprint, "./cmd/pgsprint").CombinedOutput(); err != nil {
			return e, fmt.Errorf("build pgsprint: %v: %s", err, out)
		}
	}
	if p, err := exec.LookPath("pgcopydb"); err == nil && c.steps["pgcopydb"] {
		e.pgcopydb = p
	}
	if c.dsn == "" {
		if err := checkDisk(e.work, need(c, true)); err != nil {
			return e, err
		}
		cl, err := benchkit.StartCluster(ctx, bin)
		if err != nil {
			return e, err
		}
		e.cleanup = append(e.cleanup, func() { cl.Close() })
		e.srv = versioned{cl}
	} else {
		if strings.Contains(c.dsn, "://") {
			return e, fmt.Errorf("-dsn takes a keyword string (host=... port=...), not a URI")
		}
		e.srv = versioned{external{dsn: c.dsn, binDir: bin}}
		if err := checkDisk(e.work, need(c, false)); err != nil {
			return e, err
		}
	}
	if c.steps["s3"] {
		if s3, err := benchkit.StartS3(ctx, e.work); err != nil {
			e.s3Skip = err.Error()
		} else {
			e.s3 = s3
			e.cleanup = append(e.cleanup, s3.Close)
		}
	}
	return e, nil
}

func (e *env) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

// checkpoint flushes dirty buffers so that no command pays for the one
// before it.
func (e *env) checkpoint(ctx context.Context) error {
	return e.srv.Exec(ctx, "postgres", "CHECKPOINT")
}

func (e *env) dropDB(ctx context.Context, db string) error {
	return e.srv.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
}

func (e *env) createDB(ctx context.Context, db string) error {
	if err := e.dropDB(ctx, db); err != nil {
		return err
	}
	return e.srv.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" TEMPLATE template0")
}

// finish drops the dataset's source unless -keep says otherwise, and the
// archives, so that the next dataset has the disk.
func (e *env) finish(ctx context.Context, src *source) error {
	for _, p := range []string{"pgsprint.pgs", "pgdump.dir", "pgdump.fc"} {
		os.RemoveAll(filepath.Join(e.work, p))
	}
	for _, j := range e.cfg.jobs {
		os.RemoveAll(e.handDir(src, j))
	}
	if e.cfg.keep {
		return nil
	}
	return e.dropDB(ctx, src.db)
}
