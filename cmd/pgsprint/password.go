package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/pgsprint/pgsprint/internal/pg"
)

// passwordFlags are libpq tools' -W and -w: pgsprint asks for a password
// on the terminal when the server wants one that PGPASSWORD, .pgpass or
// the connection string did not give, as pg_dump does, unless -w; -W asks
// before connecting. The password then reaches every connection and child
// program (in PGPASSWORD, never on a command line).
type passwordFlags struct {
	prompt bool // -W
	never  bool // -w
}

func (p *passwordFlags) register(fs *pflag.FlagSet) {
	fs.BoolVarP(&p.prompt, "password", "W", false, "ask for the password before connecting (it is asked for anyway, on a terminal, when the server wants one)")
	fs.BoolVarP(&p.never, "no-password", "w", false, "never ask for a password: fail if the server wants one that was not given")
}

// resolve readies the configurations of one run for connecting: with -W
// it asks for the password; otherwise, unless -w, when a terminal is at
// hand and the server refuses the first one for want of a password, it
// asks and uses the answer for every connection to that server.
func (p passwordFlags) resolve(ctx context.Context, cfgs ...*pgx.ConnConfig) error {
	if p.prompt && p.never {
		return usageError{fmt.Errorf("-W (ask for a password) and -w (never ask) cannot be used together")}
	}
	if p.never {
		return nil
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil || !term.IsTerminal(int(tty.Fd())) {
		if tty != nil {
			tty.Close()
		}
		if p.prompt {
			return usageError{fmt.Errorf("-W: cannot ask for a password: there is no terminal (set PGPASSWORD or use ~/.pgpass)")}
		}
		return nil
	}
	defer tty.Close()
	for _, cfg := range cfgs {
		if cfg == nil || cfg.Password != "" {
			continue
		}
		if !p.prompt && !wantsPassword(ctx, cfg) {
			continue
		}
		fmt.Fprintf(tty, "Password for user %s: ", cfg.User)
		pw, err := term.ReadPassword(int(tty.Fd()))
		fmt.Fprintln(tty)
		if err != nil {
			return fmt.Errorf("read password: %w", err)
		}
		cfg.Password = string(pw)
	}
	return nil
}

// wantsPassword connects once to see whether the server refuses for want
// of a password (SQLSTATE 28P01 with none given). Any other outcome is left
// to the run itself, which reports it as it always has.
func wantsPassword(ctx context.Context, cfg *pgx.ConnConfig) bool {
	conn, err := pg.Connect(ctx, cfg)
	if err == nil {
		conn.Close(context.WithoutCancel(ctx))
		return false
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "28P01"
}
