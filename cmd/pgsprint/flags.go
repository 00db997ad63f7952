package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// connFlags are the libpq-style connection flags shared by every command.
type connFlags struct {
	pg.ConnOptions
}

func (c *connFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&c.DSN, "dbname", "d", "", "database name, connection string or URI (PG* variables and .pgpass apply)")
	fs.StringVarP(&c.Host, "host", "h", "", "database server host or socket directory")
	fs.StringVarP(&c.Port, "port", "p", "", "database server port")
	fs.StringVarP(&c.User, "username", "U", "", "database user name")
}

// logFlags choose how much pgsprint says on stderr.
type logFlags struct {
	verbose bool
	quiet   bool
}

func (l *logFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&l.verbose, "verbose", "v", false, "log each phase and table")
	fs.BoolVarP(&l.quiet, "quiet", "q", false, "print nothing but errors")
}

func (l *logFlags) logger() *slog.Logger {
	level := slog.LevelWarn
	if l.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// summaryOut is where the end-of-run summary goes: stderr, unless -q.
func (l *logFlags) summaryOut() io.Writer {
	if l.quiet {
		return io.Discard
	}
	return os.Stderr
}
