package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/restore"
)

// connFlags are the libpq-style connection flags shared by every command.
type connFlags struct {
	pg.ConnOptions
	password passwordFlags
}

func (c *connFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&c.DSN, "dbname", "d", "", "database name, connection string or URI (PG* variables and .pgpass apply)")
	registerServerFlags(fs, &c.ConnOptions)
	c.password.register(fs)
	fs.StringVar(&c.Role, "role", "", "SET ROLE to this role on every connection after logging in (as pg_dump --role)")
}

// registerSettingsFlags adds the flags of how a restore writes its target
// (restore.Settings), which restore and clone share, said once: conn says
// whose maintenance_work_mem it is, tables which tables are analyzed.
// --no-statistics, whose meaning differs, each command adds itself.
func registerSettingsFlags(fs *pflag.FlagSet, s *restore.Settings, conn, tables string) {
	fs.BoolVarP(&s.NoOwner, "no-owner", "O", false, "do not restore object ownership")
	fs.BoolVarP(&s.NoACL, "no-privileges", "x", false, "do not restore privileges (GRANT/REVOKE)")
	fs.BoolVar(&s.SessionAuthorization, "use-set-session-authorization", false, "set ownership with SET SESSION AUTHORIZATION instead of ALTER OWNER (as pg_restore)")
	fs.IntVar(&s.TransactionSize, "transaction-size", 0, "create pre-data's objects N to a transaction (pg_restore 17+; default 100); rows, indexes and constraints commit one step at a time, journaled (see docs/guide/pg-dump-flags.md)")
	fs.StringVar(&s.MaintenanceWorkMem, "maintenance-work-mem", "512MB", "maintenance_work_mem of each "+conn+" (empty: the server's)")
	fs.BoolVar(&s.NoAnalyze, "no-analyze", false, "do not ANALYZE the "+tables+" tables")
}

// registerServerFlags adds -h, -p and -U.
func registerServerFlags(fs *pflag.FlagSet, c *pg.ConnOptions) {
	fs.StringVarP(&c.Host, "host", "h", "", "database server host or socket directory")
	fs.StringVarP(&c.Port, "port", "p", "", "database server port")
	fs.StringVarP(&c.User, "username", "U", "", "database user name")
}

// config is the connection configuration, with the password asked for
// on the terminal if the server wants one (see passwordFlags).
func (c *connFlags) config(ctx context.Context) (*pgx.ConnConfig, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, usageError{err}
	}
	if err := c.password.resolve(ctx, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// maxJobs bounds -j before anything starts: each job is a server
// connection (two for clone, one per side) with its own buffers, and no
// server gets faster with more COPY streams than this; the servers' own
// limit (max_connections) is checked once connected.
const maxJobs = 256

// checkJobs refuses a -j that cannot work.
func checkJobs(n int) error {
	switch {
	case n < 1:
		return usageError{fmt.Errorf("-j must be at least 1")}
	case n > maxJobs:
		return usageError{fmt.Errorf("-j %d is more than pgsprint runs at once (at most %d)", n, maxJobs)}
	}
	return nil
}

// checkLockWait refuses a --lock-wait-timeout PostgreSQL would reject,
// before connecting.
func checkLockWait(s string) error {
	if s == "" {
		return nil
	}
	if err := pg.CheckLockTimeout(s); err != nil {
		return usageError{err}
	}
	return nil
}

// logFlags choose how much pgsprint says on stderr.
type logFlags struct {
	verbose bool
	quiet   bool
	// fs is the command's flag set: with --progress=json every stderr
	// line is a JSON event, log lines included.
	fs *pflag.FlagSet
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	l.fs = fs
	fs.BoolVarP(&l.verbose, "verbose", "v", false, "log each phase and table")
	fs.BoolVarP(&l.quiet, "quiet", "q", false, "print nothing but errors")
}

// logger is the command's log: warnings and errors, everything with -v,
// errors only with -q ("print nothing but errors").
func (l *logFlags) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.level()}
	if l.json() {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// level is the least level logged: warnings, everything with -v, errors
// only with -q.
func (l *logFlags) level() slog.Level {
	switch {
	case l.quiet:
		return slog.LevelError
	case l.verbose:
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// json says whether --progress=json asked every stderr line to be a JSON
// event, log lines included.
func (l *logFlags) json() bool {
	if l.fs == nil {
		return false
	}
	p := l.fs.Lookup("progress")
	return p != nil && p.Value.String() == string(progress.JSON)
}

// summaryOut is where the end-of-run summary goes: stderr, unless -q.
func (l *logFlags) summaryOut() io.Writer {
	if l.quiet {
		return io.Discard
	}
	return os.Stderr
}

// registerFilterFlags adds pg_dump's selection flags, which dump and
// restore share with the same pattern semantics (verb: "dump" or
// "restore").
func registerFilterFlags(fs *pflag.FlagSet, f *filter.Options, verb string) {
	fs.StringArrayVarP(&f.Schemas, "schema", "n", nil, verb+" only schemas matching this pattern (as pg_dump; repeatable)")
	fs.StringArrayVarP(&f.ExcludeSchemas, "exclude-schema", "N", nil, "do not "+verb+" schemas matching this pattern")
	fs.StringArrayVarP(&f.Tables, "table", "t", nil, verb+" only tables matching this pattern (e.g. 'app.order*', '\"Mixed\"'), with their indexes, constraints and triggers")
	fs.StringArrayVarP(&f.ExcludeTables, "exclude-table", "T", nil, "do not "+verb+" tables matching this pattern")
	fs.BoolVarP(&f.SchemaOnly, "schema-only", "s", false, verb+" only the schema, no data")
	fs.BoolVarP(&f.DataOnly, "data-only", "a", false, verb+" only the data (rows, sequence values, large objects), not the schema")
}

// oneLineLogger is logger in pgsprint's one-line style ("pgsprint:
// warning: ..."), silent under -q but for errors: the follow's warnings
// read as the rest of pgsprint's messages do.
func (l *logFlags) oneLineLogger() *slog.Logger {
	if l.json() {
		return l.logger()
	}
	return slog.New(&lineHandler{out: os.Stderr, level: l.level()})
}

// lineHandler writes a record as one line: "pgsprint: warning: msg
// (key value, ...)".
type lineHandler struct {
	out   io.Writer
	level slog.Level
	attrs []slog.Attr
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("pgsprint: ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	var kv []string
	add := func(a slog.Attr) bool {
		kv = append(kv, a.Key+" "+a.Value.String())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	if len(kv) > 0 {
		b.WriteString(" (" + strings.Join(kv, ", ") + ")")
	}
	b.WriteByte('\n')
	_, err := io.WriteString(h.out, b.String())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &lineHandler{out: h.out, level: h.level, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
