package main

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
)

type dumpOptions struct {
	conn      connFlags
	log       logFlags
	file      string
	jobs      int
	compress  string
	blockSize int
}

func newDumpCmd() *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "dump -d SOURCE [-f FILE|-] [-j N] [-Z METHOD[:LEVEL]]",
		Short: "Dump a database into one archive file, in parallel",
		Long: `Dump a database into one pgsprint archive file.

Every worker reads the same exported snapshot, so the archive is one
consistent instant of the database. The schema comes from pg_dump; table
data, sequences and large objects are read by N parallel workers and
compressed in them. The file is written under a temporary name and renamed
only when complete.`,
		Example: `  pgsprint dump -d mydb -f mydb.pgs
  pgsprint dump -d "postgresql://app@db1/prod" -f prod.pgs -j 8 -Z zstd:6
  PGPASSWORD=... pgsprint dump -h db1 -U app -d prod -f prod.pgs -Z lz4
  pgsprint dump -d prod -f - | ssh backup 'cat > prod.pgs'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDump(cmd.Context(), o) },
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	o.conn.register(fs)
	fs.StringVarP(&o.file, "file", "f", "", `archive file to write; "-" or none for standard output`)
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "parallel workers")
	fs.StringVarP(&o.compress, "compress", "Z", "zstd", "compression: zstd, lz4, gzip or none, with an optional :LEVEL")
	fs.IntVar(&o.blockSize, "block-size", dump.DefaultBlockSize, "raw bytes per compressed block")
	o.log.register(fs)
	cmd.Flags().BoolP("help", "", false, "show this help")
	return cmd
}

func runDump(ctx context.Context, o dumpOptions) error {
	if o.file == "" {
		o.file = "-" // like pg_dump: no -f means standard output
	}
	if o.file == "-" && term.IsTerminal(int(os.Stdout.Fd())) {
		return usageError{fmt.Errorf("refusing to write a binary archive to a terminal: use -f FILE, or redirect or pipe standard output")}
	}
	if o.jobs < 1 {
		return usageError{fmt.Errorf("-j must be at least 1")}
	}
	c, err := codec.Parse(o.compress)
	if err != nil {
		return usageError{err}
	}
	cfg, err := o.conn.Config()
	if err != nil {
		return usageError{err}
	}
	res, err := dump.Run(ctx, dump.Options{
		Source: cfg, File: o.file, Stdout: os.Stdout, Jobs: o.jobs, Codec: c, BlockSize: o.blockSize,
		Version: version, Logger: o.log.logger(),
	})
	if err != nil {
		return err
	}
	dest := o.file
	if dest == "-" {
		dest = "standard output"
	}
	fmt.Fprintf(o.log.summaryOut(), "dumped %d tables (%d rows), %d sequences, %d large objects to %s: %s raw, %s stored (%s), in %s\n",
		res.Tables, res.Rows, res.Sequences, res.LargeObjects, dest,
		humanBytes(res.RawBytes), humanBytes(res.StoredBytes), c.Name(), res.Elapsed.Round(1e6))
	return nil
}
