package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/pgbin"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show pgsprint's version and the pg_dump/pg_restore it found",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(os.Stdout, versionText(cmd.Context()))
			return nil
		},
	}
}

// versionText is pgsprint's version and every PostgreSQL client
// installation it can use, oldest first: a dump picks the oldest one at
// least as new as the server.
func versionText(ctx context.Context) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pgsprint %s\n", version)
	all := pgbin.Installed(ctx)
	if len(all) == 0 {
		fmt.Fprintf(&b, "pg_dump/pg_restore: none found (install PostgreSQL client programs or set %s)\n", pgbin.EnvBinDir)
	}
	for _, t := range all {
		fmt.Fprintf(&b, "pg_dump/pg_restore %s in %s\n", t.Version, t.Dir)
	}
	return b.String()
}
