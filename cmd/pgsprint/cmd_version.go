package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/manual"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

// What `make build` and `make dist` set with -ldflags "-X main.NAME=...":
// the commit and the build's time (UTC, RFC 3339), beside version (main.go).
// A plain `go build` leaves them unknown.
var (
	commit    = "unknown"
	buildDate = "unknown"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Show pgsprint's version, build and the pg_dump/pg_restore it found",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(os.Stdout, versionText(cmd.Context()))
			return nil
		},
	}
}

// versionText is pgsprint's version, what it was built from and with (a
// bug report needs all of it: the zstd compressor differs between a cgo
// and a pure Go build), and every PostgreSQL client installation it can
// use, oldest first: a dump picks the oldest one at least as new as the
// server.
func versionText(ctx context.Context) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pgsprint %s\n", version)
	fmt.Fprintf(&b, "commit:  %s\n", commit)
	fmt.Fprintf(&b, "built:   %s with %s for %s/%s\n", buildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "zstd:    %s\n", codec.ZstdLinked())
	all := pgbin.Installed(ctx)
	if len(all) == 0 {
		fmt.Fprintf(&b, "pg_dump/pg_restore: none found (install PostgreSQL client programs or set %s)\n", pgbin.EnvBinDir)
	}
	for _, t := range all {
		fmt.Fprintf(&b, "pg_dump/pg_restore %s in %s\n", t.Version, t.Dir)
	}
	return b.String()
}

// newGenDocsCmd is `pgsprint gen-docs DIR`, hidden: the man pages and
// completion scripts of this very binary (internal/manual), which
// `make dist` packs.
func newGenDocsCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write the man pages and shell completions into DIR (for packaging)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			date, err := time.Parse(time.RFC3339, buildDate)
			if err != nil {
				date = time.Now().UTC()
			}
			return manual.Write(cmd.Root(), args[0], version, date)
		},
	}
}
