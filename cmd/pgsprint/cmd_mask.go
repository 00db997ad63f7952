package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
)

func newMaskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mask check [FLAGS]",
		Short: "Check masking rules against a database, and what they make of its rows",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("mask what? give check and its flags (see %s --help)", cmd.CommandPath())}
		},
	}
	var conn connFlags
	var m maskFlags
	check := &cobra.Command{
		Use:   "check -d SOURCE --mask RULE|--mask-file FILE",
		Short: "Check masking rules against the live schema, changing nothing",
		Long: `Check the masking rules a dump or clone would use (the same --mask,
--mask-file and secret flags) against the database, in one read-only
transaction, changing nothing:

- errors: a table or column that does not exist, a rule that cannot write
  the column's type (email into an integer), a rule that cannot keep a
  primary key or unique column unique, the two sides of a foreign key
  masked differently, null on a NOT NULL column;
- warnings: columns no rule names whose name (email, phone, name,
  address, token, password, iban, ssn, ...) or sampled values (e-mail
  addresses, phone numbers, IBANs, social security numbers) look
  sensitive; the rule keep silences one;
- one row of each masked table, before and after (the secret is never
  printed).

Exit status: 0 when the rules are fine and nothing looks left unmasked, 1
when errors or warnings were found, 2 for a usage error, 3 when the
server cannot be reached.`,
		Example: `  PGSPRINT_MASK_SECRET=... pgsprint mask check -d prod --mask-file mask.rules
  pgsprint mask check -d prod --mask 'app.users.email=email' --mask-secret-file secret`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := m.spec()
			if err != nil {
				return err
			}
			if !spec.Active() {
				return usageError{fmt.Errorf("no rules to check: give --mask or --mask-file")}
			}
			cfg, err := conn.config(cmd.Context())
			if err != nil {
				return err
			}
			return runMaskCheck(cmd.Context(), cfg, spec, os.Stdout)
		},
	}
	fs := check.Flags()
	conn.register(fs)
	m.register(fs)
	cmd.AddCommand(check)
	return cmd
}

// runMaskCheck prints mask.Check's report; errors or warnings fail it.
func runMaskCheck(ctx context.Context, cfg *pgx.ConnConfig, spec mask.Spec, out io.Writer) error {
	conn, err := pg.Connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rep, err := mask.Check(ctx, conn, spec)
	if err != nil {
		return err
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(out, "error: %s\n", e)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	for _, s := range rep.Samples {
		fmt.Fprintf(out, "sample row of %s:\n", s.Table)
		for i, c := range s.Columns {
			fmt.Fprintf(out, "  %s: %s -> %s\n", pg.Ident(c), shorten(s.Before[i]), shorten(s.After[i]))
		}
	}
	fmt.Fprintf(out, "%d rules, %d errors, %d warnings\n", len(spec.Rules), len(rep.Errors), len(rep.Warnings))
	switch {
	case len(rep.Errors) > 0 && len(rep.Warnings) > 0:
		return fmt.Errorf("mask check: %d errors and %d warnings (above)", len(rep.Errors), len(rep.Warnings))
	case len(rep.Errors) > 0:
		return fmt.Errorf("mask check: %d errors (above)", len(rep.Errors))
	case len(rep.Warnings) > 0:
		return fmt.Errorf("mask check: %d warnings (above); mask those columns, or name them with the rule keep", len(rep.Warnings))
	}
	return nil
}

// shorten keeps a sample value to one short line.
func shorten(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if r := []rune(s); len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}
