package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

type verifyOptions struct {
	jobs  int
	store storeFlags
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify FILE|-",
		Short: "Check every block checksum, the footer and per-chunk totals of an archive",
		Long: `Read the whole archive in parallel and check it: every frame's header and
payload checksum, decompression to the recorded size, each stream's totals
(rows, bytes, checksum of the raw data) against its end frame and the
footer, and that every table chunk and large object in the manifest is
present. Exits 0 only for a sound archive. With "-" the archive is read
from standard input and checked front to back as it passes.`,
		Example: `  pgsprint verify mydb.pgs && echo "backup is sound"
  ssh backup 'cat prod.pgs' | pgsprint verify -`,
		Args: exactlyOneFile,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd.Context(), args[0], o, os.Stdin, os.Stdout)
		},
	}
	cmd.Flags().IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "streams checked in parallel")
	o.store.register(cmd.Flags(), false)
	return cmd
}

func runVerify(ctx context.Context, loc string, o verifyOptions, in io.Reader, out io.Writer) error {
	start := time.Now()
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	ar, err := openArchive(ctx, loc, o.store.options(in, nil, nil), archive.OpenOptions{Access: archive.Scan})
	if err != nil {
		return err
	}
	defer ar.Close()
	if location.IsURL(loc) {
		loc = ar.String() // a pre-signed URL's query holds a secret
	}
	if err := archive.Check(ctx, ar.Source, o.jobs); err != nil {
		return fmt.Errorf("archive %s is damaged: %w", loc, err)
	}
	_, _, streams, err := archive.Summarize(ar.Source)
	if err != nil {
		return fmt.Errorf("archive %s is damaged: %w", loc, err)
	}
	var rows int64
	for _, s := range streams {
		rows += s.Rows
	}
	// Data only, as dump, list and restore count it (the schema is
	// pg_dump's archive, not data).
	raw, stored := archive.DataTotals(streams)
	fmt.Fprintf(out, "%s: sound: %d streams, %d rows, %s of data raw in %s stored, checked in %s\n",
		loc, len(streams), rows, progress.Bytes(raw), progress.Bytes(stored), time.Since(start).Round(time.Millisecond))
	return nil
}
