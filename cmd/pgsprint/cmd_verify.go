package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/seal"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

type verifyOptions struct {
	jobs int
	readFlags
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [-f] FILE|-",
		Short: "Check every block checksum, the footer and per-chunk totals of an archive",
		Long: `Read the whole archive in parallel and check it: every frame's header and
payload checksum, decompression to the recorded size, each stream's totals
(rows, bytes, checksum of the raw data) against its end frame and the
footer, and that every table chunk and large object in the manifest is
present. Exits 0 only for a sound archive. With "-" the archive is read
from standard input and checked front to back as it passes.

An encrypted archive is checked whole with its key (--identity or a
passphrase): every authentication tag too. Without one, only its
structure is checked (checksums of the encrypted frames, their order, the
footer's counts), and verify says so.`,
		Example: `  pgsprint verify mydb.pgs && echo "backup is sound"
  ssh backup 'cat prod.pgs' | pgsprint verify -`,
		Args: atMostOneFile,
		RunE: o.runE(func(ctx context.Context, loc string, in io.Reader, out io.Writer) error {
			return runVerify(ctx, loc, o, in, out)
		}),
	}
	cmd.Flags().IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "streams checked in parallel")
	o.readFlags.register(cmd.Flags())
	return cmd
}

func runVerify(ctx context.Context, loc string, o verifyOptions, in io.Reader, out io.Writer) error {
	start := time.Now()
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	ids, err := o.keys.identities()
	if err != nil {
		return err
	}
	lo := o.store.options(in, nil, nil)
	ar, err := openArchive(ctx, loc, lo, archive.OpenOptions{Access: archive.Scan, Identities: ids})
	if errors.Is(err, seal.ErrNoKey) && len(ids) == 0 {
		return verifyStructure(ctx, loc, lo, out, start)
	}
	if err != nil {
		return err
	}
	defer ar.Close()
	if location.IsURL(loc) {
		loc = ar.String() // a pre-signed URL's query holds a secret
	}
	if err := archive.Check(ctx, ar.Source, o.jobs); err != nil {
		return archive.On(ar.String(), err)
	}
	_, _, streams, err := archive.Summarize(ar.Source)
	if err != nil {
		return archive.On(ar.String(), err)
	}
	var rows int64
	for _, s := range streams {
		rows += s.Rows
	}
	// Data only, as dump, list and restore count it (the schema is
	// pg_dump's archive, not data).
	raw, stored := archive.DataTotals(streams)
	encrypted := ""
	if by := openedBy(ar.Source); by != "" {
		encrypted = ", encrypted, opened with " + by + ", every authentication tag checked"
	}
	fmt.Fprintf(out, "%s: sound: %d streams, %d rows, %s of data raw in %s stored%s, checked in %s\n",
		loc, len(streams), rows, progress.Bytes(raw), progress.Bytes(stored), encrypted, time.Since(start).Round(time.Millisecond))
	return nil
}

// verifyStructure checks an encrypted archive whose key was not given:
// its structure only, which the output says.
func verifyStructure(ctx context.Context, loc string, lo location.Options, out io.Writer, start time.Time) error {
	b, err := location.Parse(loc, lo)
	if err != nil {
		return err
	}
	src, err := b.Open(ctx)
	if err != nil {
		return err
	}
	defer src.Close()
	r, size, ok := src.Random()
	if !ok {
		return fmt.Errorf("archive on %s is encrypted: without --identity or a passphrase only an archive with random access (a file, an object) can be checked", b)
	}
	info, err := archive.CheckStructure(r, size)
	if err != nil {
		return archive.On(b.String(), err)
	}
	fmt.Fprintf(out, "%s: structure sound (%s; contents not checked: give --identity or a passphrase to check every authentication tag), checked in %s\n",
		loc, info, time.Since(start).Round(time.Millisecond))
	return nil
}

// openedBy says which of the reader's identities opened an encrypted
// archive, or is empty for a clear one.
func openedBy(ar archive.Source) string {
	if e, ok := ar.(interface{ OpenedBy() string }); ok {
		return e.OpenedBy()
	}
	return ""
}
