package main

import (
	"context"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/demo"
	"github.com/pgsprint/pgsprint/internal/tempfile"
)

type demoOptions struct {
	scale    float64
	jobs     int
	compress string
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [--scale N]",
		Short: "Dump and restore a sample database on a throwaway local cluster, side by side with pg_dump",
		Long: `Start a throwaway PostgreSQL cluster in a temporary directory, load a
sample database (three tables of names, orders and activity logs with
realistic text, keys, 10 secondary indexes and a foreign key, plus a few
other object kinds), dump it with
pgsprint and restore it into a second database, verify the two are equal
(schema per pg_dump, row hashes per table), do the same with pg_dump -Fc and
pg_restore -j, print the timings, sizes and how busy the cores were, and
remove everything.`,
		Example: `  pgsprint demo
  pgsprint demo --scale 1 -j 2`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	fs.Float64Var(&o.scale, "scale", 0.1, "size of the sample database (1 is about 1 GB)")
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel workers for both tools")
	fs.StringVarP(&o.compress, "compress", "Z", "zstd", "pgsprint compression")
	return cmd
}

func runDemo(ctx context.Context, o demoOptions) error {
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	var defaults logFlags // warnings only
	removeStale(defaults.logger(), "", tempfile.Demo)
	c, err := codec.Parse(o.compress)
	if err != nil {
		return usageError{err}
	}
	return demo.Run(ctx, demo.Options{Scale: o.scale, Jobs: o.jobs, Codec: c, Version: version, Out: os.Stdout})
}
