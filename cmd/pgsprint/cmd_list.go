package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/cluster"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

type listOptions struct {
	json bool
	readFlags
}

func newListCmd() *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list [-f] FILE|-",
		Short: "Show what an archive holds: source, snapshot, codec, tables with rows and sizes",
		Long: `Show what an archive holds. With "-" the archive is read from standard
input; its totals come at the end of each stream, so the whole archive is
read (and checked) before anything is printed.`,
		Example: `  pgsprint list mydb.pgs
  ssh backup 'cat prod.pgs' | pgsprint list -
  pgsprint list --json mydb.pgs | jq '.tables[] | select(.rows > 1000000)'`,
		Args: atMostOneFile,
		RunE: o.runE(func(ctx context.Context, loc string, in io.Reader, out io.Writer) error {
			return runList(ctx, loc, o, in, out)
		}),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	o.readFlags.register(cmd.Flags())
	return cmd
}

// listing is the JSON form of `pgsprint list`.
type listing struct {
	Manifest *archive.Manifest      `json:"manifest"`
	Tables   []archive.TableSummary `json:"tables"`
	// DataRawBytes and DataStoredBytes are archive.DataTotals: tables and
	// large objects, the number dump, restore and verify report too.
	DataRawBytes    int64 `json:"data_raw_bytes"`
	DataStoredBytes int64 `json:"data_stored_bytes"`
}

func runList(ctx context.Context, loc string, o listOptions, in io.Reader, out io.Writer) error {
	ids, err := o.keys.identities()
	if err != nil {
		return err
	}
	ar, err := openArchive(ctx, loc, o.store.options(in, nil, nil), archive.OpenOptions{Access: archive.Scan, Identities: ids})
	if err != nil {
		return err
	}
	defer ar.Close()
	m, tables, streams, err := archive.Summarize(ar.Source)
	if err != nil {
		return archive.On(ar.String(), err)
	}
	dataRaw, dataStored := archive.DataTotals(streams)
	if m.IsCluster() {
		return listServer(ar, m, streams, o, out)
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		// Names that are not UTF8 (a SQL_ASCII source's) are marked
		// as in the manifest (docs/FORMAT.md), not replaced.
		return enc.Encode(archive.MarkRaw(listing{Manifest: m, Tables: tables, DataRawBytes: dataRaw, DataStoredBytes: dataStored}))
	}
	fmt.Fprintf(out, "database:   %s (PostgreSQL %s, encoding %s)\n", m.Database, m.ServerVersion, m.Encoding)
	fmt.Fprintf(out, "snapshot:   %s at %s\n", m.Snapshot, m.SnapshotTime.Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(out, "written by: pgsprint %s with pg_dump %s, format %d\n", m.ToolVersion, m.PgDumpVersion, m.FormatVersion)
	fmt.Fprintf(out, "codec:      %s, %s blocks\n", m.CodecText(), progress.Bytes(int64(m.BlockSize)))
	if s := m.Subset; s != nil {
		empty := 0
		for _, t := range s.Tables {
			if t.Empty {
				empty++
			}
		}
		fmt.Fprintf(out, "subset:     development copy, %s\n", s.Describe())
		fmt.Fprintf(out, "            %d tables hold the rows the rules chose, %d none (--subset-others none), the others all their rows\n", len(s.Tables)-empty, empty)
	}
	if mk := m.Mask; mk != nil {
		fmt.Fprintf(out, "masked:     %s\n", maskedLine(m))
		for _, c := range mk.Columns {
			fmt.Fprintf(out, "            %s.%s = %s\n", pg.Qualified(c.Schema, c.Table), pg.Ident(c.Column), c.Rule)
		}
	}
	if by := openedBy(ar.Source); by != "" {
		fmt.Fprintf(out, "encrypted:  opened with %s\n", by)
	}
	if m.DataOnly {
		fmt.Fprintf(out, "contents:   data only (--data-only): restores into existing tables\n")
	}
	var rows, raw, stored int64
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ntable\trows\traw\tstored\tchunks\t")
	// Largest first, by the raw column; the JSON keeps the manifest's order.
	sorted := append([]archive.TableSummary(nil), tables...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].RawBytes > sorted[j].RawBytes })
	for _, t := range sorted {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t\n", pg.Qualified(t.Schema, t.Name), t.Rows, progress.Bytes(t.RawBytes), progress.Bytes(t.StoredBytes), t.Chunks)
		rows, raw, stored = rows+t.Rows, raw+t.RawBytes, stored+t.StoredBytes
	}
	fmt.Fprintf(tw, "%d tables\t%d\t%s\t%s\t%d\t\n", len(tables), rows, progress.Bytes(raw), progress.Bytes(stored), len(m.Chunks))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d sequences, %d large objects, %d materialized views to refresh\n", len(m.Sequences), len(m.LargeObjects), len(m.Matviews))
	fmt.Fprintf(out, "data:       %s raw, %s stored (tables and large objects; as dump, restore and verify count it)\n", progress.Bytes(dataRaw), progress.Bytes(dataStored))
	return nil
}

// atMostOneFile allows the archive as the one positional argument.
func atMostOneFile(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageError{fmt.Errorf("want one archive file, got %d arguments (see %s --help)", len(args), cmd.CommandPath())}
	}
	return nil
}

// archiveFlag is the archive list and verify read: -f FILE, as dump and
// restore name it, or the argument, as these commands always took it.
type archiveFlag struct{ file string }

func (a *archiveFlag) register(fs *pflag.FlagSet) {
	fs.StringVarP(&a.file, "file", "f", "", "the archive: a file, - for standard input, s3://... or https://... (the same as giving it as the argument)")
}

// location is the archive named by -f or by the argument (atMostOneFile
// has checked there is at most one); both may be given if they agree.
func (a *archiveFlag) location(cmd *cobra.Command, args []string) (string, error) {
	switch {
	case len(args) == 1 && a.file != "" && args[0] != a.file:
		return "", usageError{fmt.Errorf("-f %s and the argument %s name two archives: give one (see %s --help)", a.file, args[0], cmd.CommandPath())}
	case len(args) == 1:
		return args[0], nil
	case a.file != "":
		return a.file, nil
	}
	return "", usageError{fmt.Errorf("no archive given: name it with -f FILE or as the argument (see %s --help)", cmd.CommandPath())}
}

// readFlags are what list and verify, the commands that read one archive
// and change nothing, share: the archive, its keys and the store's options.
type readFlags struct {
	archive archiveFlag
	keys    keyFlags
	store   storeFlags
}

func (r *readFlags) register(fs *pflag.FlagSet) {
	r.archive.register(fs)
	r.keys.register(fs)
	r.store.register(fs, false)
}

// runE runs run on the archive -f or the argument names ("-": standard
// input), writing to standard output as the end of a pipe.
func (r *readFlags) runE(run func(ctx context.Context, loc string, in io.Reader, out io.Writer) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		loc, err := r.archive.location(cmd, args)
		if err != nil {
			return err
		}
		out := &pipeOut{w: os.Stdout}
		return out.result(run(cmd.Context(), loc, os.Stdin, out))
	}
}

// openArchive opens the archive at loc, whatever its medium; "-" reads
// lo.In.
func openArchive(ctx context.Context, loc string, lo location.Options, o archive.OpenOptions) (*archive.Opened, error) {
	b, err := location.Parse(loc, lo)
	if err != nil {
		return nil, err
	}
	return archive.OpenLocation(ctx, b, o)
}

// maskedLine is list's "masked:" line. An archive with masked columns and
// optimizer statistics (--statistics-only or --no-data, written by
// pgsprint before they were refused with --mask) holds original values of
// those columns in the statistics: it is not called a masked copy.
func maskedLine(m *archive.Manifest) string {
	if m.StatisticsWithoutData {
		return "NOT a masked development copy: its optimizer statistics hold original values of the masked columns (" + m.Mask.Describe() + "); dump it again without statistics"
	}
	return m.Mask.Describe()
}

// serverListing is the JSON form of `pgsprint list` of a whole-server
// archive.
type serverListing struct {
	Manifest    *archive.Manifest         `json:"manifest"`
	Databases   []archive.DatabaseSummary `json:"databases"`
	Roles       []string                  `json:"roles,omitempty"`
	Tablespaces []string                  `json:"tablespaces,omitempty"`
	// DataRawBytes and DataStoredBytes are archive.DataTotals of every database.
	DataRawBytes    int64 `json:"data_raw_bytes"`
	DataStoredBytes int64 `json:"data_stored_bytes"`
}

// listServer is list of a whole-server archive: the globals' roles and
// tablespaces (read from a file; a pipe's stream is gone once listed) and
// each database's totals.
func listServer(ar *archive.Opened, m *archive.Manifest, streams []archive.StreamInfo, o listOptions, out io.Writer) error {
	l := serverListing{Manifest: m, Databases: archive.DatabaseSummaries(m, streams)}
	l.DataRawBytes, l.DataStoredBytes = archive.DataTotals(streams)
	r, random := ar.Source.(*archive.Reader)
	if random && m.Globals != nil {
		sr := r.OpenStream(m.Globals.Stream)
		b, err := io.ReadAll(sr)
		sr.Close()
		if err != nil {
			return fmt.Errorf("read globals: %w", err)
		}
		if l.Roles, l.Tablespaces, err = cluster.GlobalsObjects(string(b)); err != nil {
			return err
		}
	}
	if o.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(archive.MarkRaw(l))
	}
	fmt.Fprintf(out, "server:     PostgreSQL %s, %d databases (dump --all)\n", m.ServerVersion, len(m.Databases))
	fmt.Fprintf(out, "written by: pgsprint %s with pg_dump %s, format %d\n", m.ToolVersion, m.PgDumpVersion, m.FormatVersion)
	fmt.Fprintf(out, "codec:      %s, %s blocks\n", m.CodecText(), progress.Bytes(int64(m.BlockSize)))
	if by := openedBy(ar.Source); by != "" {
		fmt.Fprintf(out, "encrypted:  opened with %s\n", by)
	}
	if random {
		fmt.Fprintf(out, "roles:      %s\n", orNone(l.Roles))
		fmt.Fprintf(out, "tablespaces: %s\n", orNone(l.Tablespaces))
	}
	if g := m.Globals; g != nil {
		if g.NoRolePasswords {
			fmt.Fprintln(out, "passwords:  not dumped (pg_authid was not readable)")
		}
		for _, d := range g.Skipped {
			fmt.Fprintf(out, "skipped:    %s (%s)\n", d.Name, d.Reason)
		}
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\ndatabase\tsize\tencoding\ttables\trows\traw\tstored\tchunks\t")
	for _, d := range l.Databases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t\n", d.Name, progress.Bytes(d.SizeBytes), d.Encoding, len(d.Tables), d.Rows,
			progress.Bytes(d.RawBytes), progress.Bytes(d.StoredBytes), d.Chunks)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\ndata:       %s raw, %s stored (tables and large objects of every database)\n", progress.Bytes(l.DataRawBytes), progress.Bytes(l.DataStoredBytes))
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
