package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/spf13/cobra"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/compare"
	"github.com/pgsprint/pgsprint/internal/compare/content"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/pgbin"
)

type compareOptions struct {
	source, target string
	jobs           int
	schema         bool
	all            bool
	server         pg.ConnOptions // -h, -p, -U for both sides
	// acrossVersions compares the schemas of two major versions, leaving
	// out what each prints differently (follow finish after an upgrade).
	acrossVersions bool
	// noReplication leaves publications and subscriptions out of the
	// schemas: follow finish compares while its own are there.
	noReplication bool
	// maskSecretFile holds the mask secret: with it the masked columns
	// of a masked copy are recomputed from the source and compared.
	maskSecretFile string
	maskSecret     []byte // read from maskSecretFile by runCompare
}

// errDifferent is returned when the databases differ; the report says how.
var errDifferent = errors.New("databases differ")

func newCompareCmd() *cobra.Command {
	var o compareOptions
	cmd := &cobra.Command{
		Use:   "compare --source SRC --target DST [-j N] [--schema]",
		Short: "Compare two databases table by table: row counts and content hashes",
		Long: `Compare two databases: every table's and populated materialized view's row
count and order-independent content hash, every sequence's state, and every
large object's metadata and content. Each side is read in one snapshot, on
N connections at once. With --schema, pg_dump --schema-only of both sides
must match too. Exits 0 only when everything is equal.

On a development copy (a subset or masked restore or clone, as recorded in
it), the tables whose hashes differ by design are compared row by row with
the source, by primary key (by the whole row where there is none): every
row of the copy must be the source's, a subset may lack rows, and a masked
copy's unmasked columns must be equal; with --mask-secret-file, its masked
columns are recomputed from the source and compared too.`,
		Example: `  pgsprint compare --source prod --target "host=replica dbname=prod" -j 4
  pgsprint compare -h db1 -U app --source prod --target prod_copy   # -h/-p/-U for both sides
  pgsprint compare --source postgresql://db1/app --target postgresql://db2/app --schema`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCompare(cmd.Context(), o, os.Stdout) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.source, "source", "", "source database: name, connection string or URI")
	fs.StringVar(&o.target, "target", "", "target database: name, connection string or URI")
	fs.IntVarP(&o.jobs, "jobs", "j", runtime.NumCPU(), "tables hashed in parallel on each side")
	fs.BoolVar(&o.schema, "schema", false, "also compare pg_dump --schema-only of both sides")
	fs.BoolVar(&o.all, "all", false, "list equal tables too")
	fs.StringVar(&o.maskSecretFile, "mask-secret-file", "", "on a masked development copy, recompute its masked columns from the source with the secret on the first line of `FILE` (else $"+mask.SecretEnv+") and compare them too")
	registerServerFlags(fs, &o.server)
	return cmd
}

func runCompare(ctx context.Context, o compareOptions, out io.Writer) error {
	if o.source == "" || o.target == "" {
		return usageError{fmt.Errorf("both --source and --target are needed")}
	}
	secret, err := maskSecret(o.maskSecretFile)
	if err != nil {
		return err
	}
	o.maskSecret = []byte(secret)
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	// -h, -p and -U apply to both sides, under what each names itself.
	for _, side := range []*string{&o.source, &o.target} {
		c := o.server
		c.DSN = *side
		s, err := c.ConnString()
		if err != nil {
			return usageError{err}
		}
		*side = s
	}
	src, err := pg.ConnOptions{DSN: o.source}.Config()
	if err != nil {
		return usageError{err}
	}
	dst, err := pg.ConnOptions{DSN: o.target}.Config()
	if err != nil {
		return usageError{err}
	}
	found, err := compareConfigs(ctx, o, src, dst, nil, out)
	if err != nil {
		return err
	}
	if found.different() {
		return errDifferent
	}
	return nil
}

// compared is what compareConfigs found different.
type compared struct {
	entries []compare.Pair // the keys that differ
	schema  string         // the schema diff, "" when equal or not compared
}

func (c *compared) different() bool { return len(c.entries) > 0 || c.schema != "" }

// compareConfigs compares both databases and reports to out. With
// tables, only those tables (quoted schema.name) are compared, with the
// sequences the target has: a clone of a selection.
func compareConfigs(ctx context.Context, o compareOptions, src, dst *pgx.ConnConfig, tables []string, out io.Writer) (*compared, error) {
	// The schemas are dumped while the rows are hashed: pg_dump waits on
	// the servers' catalogs, the hashing on their CPUs.
	var fa, fb map[string]string
	var diff, subsetA, subsetB, maskA, maskB string
	var maskedA, maskedB map[string]bool
	var recordA, recordB *archive.Mask
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { maskedA, maskA, recordA, err = compare.MaskedOf(gctx, src); return err })
	g.Go(func() (err error) { maskedB, maskB, recordB, err = compare.MaskedOf(gctx, dst); return err })
	g.Go(func() (err error) { subsetA, err = compare.SubsetOf(gctx, src); return err })
	g.Go(func() (err error) { subsetB, err = compare.SubsetOf(gctx, dst); return err })
	g.Go(func() (err error) { fa, err = compare.FingerprintParallel(gctx, src, o.jobs); return err })
	g.Go(func() (err error) { fb, err = compare.FingerprintParallel(gctx, dst, o.jobs); return err })
	if o.schema {
		g.Go(func() (err error) { diff, err = compareSchemas(gctx, o, tables); return err })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if tables != nil {
		keep := make(map[string]bool, len(tables))
		for _, t := range tables {
			keep[t] = true
		}
		for k, v := range fb {
			if strings.HasPrefix(v, "last_value=") {
				keep[k] = true
			}
		}
		for _, fp := range []map[string]string{fa, fb} {
			for k := range fp {
				if !keep[k] {
					delete(fp, k)
				}
			}
		}
	}
	// The tables a development copy holds other values in by design
	// (fewer rows, masked columns) are compared row by row below; they
	// are those both sides have, with hashes that differ.
	var byRow []string
	if subsetA != "" || subsetB != "" || maskA != "" || maskB != "" {
		for _, e := range compare.Compare(fa, fb) {
			if e.InA && e.InB && !e.Equal() && strings.HasPrefix(e.A, "rows=") {
				byRow = append(byRow, e.Key)
			}
		}
	}
	found := &compared{}
	switch {
	case maskB != "":
		fmt.Fprintf(out, "target is a %s: the values of its masked tables differ by design\n", maskB)
		reportMasked(out, fa, fb, maskedB, o.all)
	case maskA != "":
		fmt.Fprintf(out, "source is a %s: the values of its masked tables differ by design\n", maskA)
		reportMasked(out, fa, fb, maskedA, o.all)
	}
	switch {
	case subsetB != "":
		fmt.Fprintf(out, "target is a development copy (%s): its tables hold fewer rows by design\n", subsetB)
		found.entries = reportSubset(out, fa, fb, o.all)
	case subsetA != "":
		fmt.Fprintf(out, "source is a development copy (%s): its tables hold fewer rows by design\n", subsetA)
		found.entries = reportSubset(out, fb, fa, o.all)
	default:
		for _, e := range compare.Compare(fa, fb) {
			if !e.Equal() {
				found.entries = append(found.entries, e)
			}
		}
		reportFingerprints(out, fa, fb, o.all)
	}
	if len(byRow) > 0 {
		reported := map[string]bool{}
		for _, e := range found.entries {
			reported[e.Key] = true
		}
		var check []string
		for _, k := range byRow {
			if !reported[k] {
				check = append(check, k)
			}
		}
		opts := content.Options{Subset: subsetA != "" || subsetB != "", Mask: recordB, Secret: o.maskSecret}
		whole, copy, of := src, dst, "target"
		if subsetB == "" && maskB == "" {
			whole, copy, of, opts.Mask = dst, src, "source", recordA
		}
		entries, err := reportContent(ctx, out, whole, copy, check, opts, of)
		if err != nil {
			return nil, err
		}
		found.entries = append(found.entries, entries...)
	}
	if o.schema {
		if diff != "" {
			fmt.Fprintf(out, "schema differs (- source, + target):\n%s\n", diff)
			found.schema = diff
		} else {
			fmt.Fprintln(out, "schema: equal")
		}
	}
	return found, nil
}

// reportFingerprints prints a line per differing key (and per equal key
// with all) and a total; it reports whether anything differs.
func reportFingerprints(out io.Writer, a, b map[string]string, all bool) bool {
	entries := compare.Compare(a, b)
	equal := 0
	for _, e := range entries {
		switch {
		case !e.InA:
			fmt.Fprintf(out, "only in target: %s (%s)\n", e.Key, e.B)
		case !e.InB:
			fmt.Fprintf(out, "only in source: %s (%s)\n", e.Key, e.A)
		case e.A != e.B:
			fmt.Fprintf(out, "DIFFERENT: %s\n  source: %s\n  target: %s\n", e.Key, e.A, e.B)
		default:
			equal++
			if all {
				fmt.Fprintf(out, "equal: %s (%s)\n", e.Key, e.A)
			}
		}
	}
	fmt.Fprintf(out, "%d of %d objects equal\n", equal, len(entries))
	return equal != len(entries)
}

// reportSubset is reportFingerprints where copy is a subset of whole
// (compare.SubsetOf): a table with fewer rows in copy is what a subset
// is, counted but not reported; more rows, an object on one side only, or
// any other difference (a sequence, a large object) is reported. It
// returns the differences beyond the subset.
func reportSubset(out io.Writer, whole, copy map[string]string, all bool) []compare.Pair {
	equal, fewer := 0, 0
	var different []compare.Pair
	for _, e := range compare.Compare(whole, copy) {
		switch {
		case e.Equal():
			equal++
			if all {
				fmt.Fprintf(out, "equal: %s (%s)\n", e.Key, e.A)
			}
		case e.InA && e.InB && compare.FewerRows(e.B, e.A):
			fewer++
			if all {
				fmt.Fprintf(out, "subset: %s (%s of %s)\n", e.Key, e.B, e.A)
			}
		default:
			different = append(different, e)
			fmt.Fprintf(out, "DIFFERENT: %s\n  whole: %s\n  subset: %s\n", e.Key, present(e.A, e.InA), present(e.B, e.InB))
		}
	}
	fmt.Fprintf(out, "%d objects equal, %d tables with fewer rows (the subset's), %d different\n", equal, fewer, len(different))
	return different
}

// reportMasked takes out of a and b the masked tables (of masked) that
// hold as many rows on both sides, whose values differ by design, and
// counts them; the rest is compared as usual.
func reportMasked(out io.Writer, a, b map[string]string, masked map[string]bool, all bool) {
	n := 0
	for k := range masked {
		va, inA := a[k]
		vb, inB := b[k]
		if !inA || !inB || !compare.SameRows(va, vb) {
			continue
		}
		if all {
			fmt.Fprintf(out, "masked: %s (%s, %s)\n", k, va, vb)
		}
		delete(a, k)
		delete(b, k)
		n++
	}
	fmt.Fprintf(out, "%d masked tables with as many rows on both sides\n", n)
}

// reportContent compares the tables of copy (a development copy, of is
// "target" or "source") with whole's row by row (content.Diff),
// prints a line per table that differs and a total, and returns them.
func reportContent(ctx context.Context, out io.Writer, whole, copy *pgx.ConnConfig, tables []string, o content.Options, of string) ([]compare.Pair, error) {
	diffs, err := content.Diff(ctx, whole, copy, tables, o)
	if err != nil {
		return nil, err
	}
	var entries []compare.Pair
	for _, m := range diffs {
		fmt.Fprintf(out, "DIFFERENT: %s: %d rows differ (the copy is the %s); first: %s\n", m.Table, m.Rows, of, m.First)
		entries = append(entries, compare.Pair{Key: m.Table, A: "rows", B: m.First, InA: true, InB: true})
	}
	how := "masked columns left out"
	switch {
	case o.Mask == nil:
		how = "no masked columns"
	case len(o.Secret) > 0:
		how = "masked columns recomputed with the secret"
	}
	fmt.Fprintf(out, "%d tables of the development copy compared row by row (%s): %d different\n", len(tables), how, len(diffs))
	return entries, nil
}

// present is a fingerprint, or says that the side lacks the object.
func present(v string, ok bool) string {
	if !ok {
		return "(missing)"
	}
	return v
}

// compareSchemas diffs pg_dump --schema-only of both sides, of tables
// only when tables is not nil.
func compareSchemas(ctx context.Context, o compareOptions, tables []string) (string, error) {
	// The newest pg_dump can read every older server, and dumping both
	// sides with the same one keeps version artifacts out of the diff.
	tools, err := pgbin.Newest(ctx)
	if err != nil {
		return "", err
	}
	// One side after the other: pg_dump locks every table of its database
	// until it ends, and two at once on one server (a restored copy beside
	// its source) would need twice the lock slots pg_dump alone needs.
	var selection []string
	if o.noReplication {
		selection = append(selection, "--no-publications", "--no-subscriptions")
	}
	for _, t := range tables {
		selection = append(selection, "--table="+t)
	}
	sa, err := compare.SchemaDump(ctx, tools.Dir, o.source, selection...)
	if err != nil {
		return "", err
	}
	sb, err := compare.SchemaDump(ctx, tools.Dir, o.target, selection...)
	if err != nil {
		return "", err
	}
	if o.acrossVersions {
		sa, sb = compare.NormalizeAcrossVersions(sa), compare.NormalizeAcrossVersions(sb)
	}
	return strings.TrimSpace(compare.SchemaDiff(sa, sb)), nil
}
