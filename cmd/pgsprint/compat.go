package main

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/listfile"
)

// The flags in this file are pg_dump's and pg_restore's, with their
// meaning where it is the same for pgsprint, and a one-line usage error
// saying why where it is not: a DBA's fingers type them, and "unknown flag"
// helps no one. docs/guide/pg-dump-flags.md lists every one.

// compatFlags are the pg_dump/pg_restore flags a command takes besides
// selection (registerFilterFlags) and connection (connFlags).
type compatFlags struct {
	cmd        string // "dump", "restore" or "clone"
	sections   []string
	filterFile []string
	ifExists   bool
	// refused are flags that parse but always stop with their reason.
	refused map[string]string
	// values of refused flags, so that pflag can parse them
	encoding, format   string
	noTablespacesDump  bool
	loadViaRoot        bool
	noTableAMDump      bool
	noToastCompression bool
	statistics         bool // --statistics: the default, accepted as pg_dump 18's
	// pg_dump 18's parts: each leaves out one part, where --schema-only
	// and --data-only leave the statistics out too (applyParts).
	noData, noSchema, statisticsOnly bool
	// values of refused flags
	withParts                  [3]bool
	restrictKey                string
	sessionAuthDump, serialDef bool
}

// register adds the flags to fs for f's command (f.Objects and the
// selection they feed travel in the command's filter options).
func (c *compatFlags) register(fs *pflag.FlagSet, f *filter.Options) {
	live := c.cmd != "restore" // reads a source database
	ob := &f.Objects
	fs.StringArrayVar(&c.sections, "section", nil, "only this part: pre-data, data or post-data (repeatable, as pg_dump; which combinations work: docs/guide/pg-dump-flags.md)")
	fs.StringArrayVar(&c.filterFile, "filter", nil, "read include/exclude patterns from this file (PostgreSQL 17's --filter format)")
	fs.BoolVar(&f.StrictNames, "strict-names", false, "each -n and -t pattern must match something")
	if live {
		fs.StringArrayVar(&f.TableAndChildren, "table-and-children", nil, c.cmd+" only tables matching this pattern and the tables that inherit from them (partitions)")
		fs.StringArrayVar(&f.ExcludeTableAndChildren, "exclude-table-and-children", nil, "do not "+c.cmd+" tables matching this pattern, nor the tables that inherit from them")
		fs.StringArrayVar(&f.ExcludeTableDataAndChildren, "exclude-table-data-and-children", nil, "as --exclude-table-data, for the tables that inherit from the matching ones too")
		fs.StringArrayVarP(&f.Extensions, "extension", "e", nil, c.cmd+" only extensions matching this pattern (as pg_dump)")
		fs.StringArrayVar(&f.ExcludeExtensions, "exclude-extension", nil, "do not "+c.cmd+" extensions matching this pattern (needs pg_dump 17)")
	}
	fs.BoolVar(&ob.NoComments, "no-comments", false, "leave out comments")
	fs.BoolVar(&ob.NoPublications, "no-publications", false, "leave out publications")
	fs.BoolVar(&ob.NoSubscriptions, "no-subscriptions", false, "leave out subscriptions")
	fs.BoolVar(&ob.NoSecurityLabels, "no-security-labels", false, "leave out security labels")
	fs.BoolVar(&ob.NoPolicies, "no-policies", false, "leave out row security policies (needs pg_dump/pg_restore 18)")
	fs.BoolVar(&c.noData, "no-data", false, "leave out the data (rows, sequence values, large objects) but keep the schema and the statistics (as pg_dump 18)")
	fs.BoolVar(&c.noSchema, "no-schema", false, "leave out the schema but keep the data and the statistics: into existing tables (as pg_dump 18)")
	fs.BoolVar(&c.statisticsOnly, "statistics-only", false, "only the optimizer statistics, into existing tables (PostgreSQL 18+)")
	if live {
		fs.BoolVar(&f.SequenceData, "sequence-data", false, "with --schema-only, --no-data or --statistics-only: keep the sequences' values (as pg_dump)")
		fs.BoolVar(&f.NoUnloggedTableData, "no-unlogged-table-data", false, "leave out the rows of unlogged tables, keeping their definitions")
		fs.BoolVarP(&f.IncludeLargeObjects, "large-objects", "b", false, "large objects even when -n or -t narrows the selection (as pg_dump)")
		fs.BoolVar(&f.IncludeLargeObjects, "blobs", false, "same as --large-objects (deprecated, as in pg_dump)")
		fs.BoolVarP(&f.ExcludeLargeObjects, "no-large-objects", "B", false, "leave out large objects")
		fs.BoolVar(&f.ExcludeLargeObjects, "no-blobs", false, "same as --no-large-objects (deprecated, as in pg_dump)")
		fs.BoolVar(&c.serialDef, "serializable-deferrable", false, "read in a snapshot no running serializable transaction can make anomalous, waiting for one if need be (as pg_dump)")
	}
	c.refused = map[string]string{
		"encoding": "pgsprint archives always hold table data in the source database's encoding, and restore converts it to the target's (a --to-sql script names the encoding of each part): -E has no meaning here",
		"load-via-partition-root": "pgsprint loads each partition's rows into that partition, in parallel and journaled by chunk; " +
			"for a target that routes rows differently, use pg_dump --load-via-partition-root",
		"restrict-key": "it sets the psql \\restrict key of a pg_dump or pg_restore plain-text script, which pgsprint never writes " +
			"(restore --to-sql writes a script of its own)",
	}
	for i, part := range []string{"schema", "data", "statistics"} {
		name := "with-" + part
		fs.BoolVar(&c.withParts[i], name, false, "not taken: PostgreSQL 18's betas only")
		c.refused[name] = "PostgreSQL 18's betas had it, its release has not (pg_dump 18 does not take it either): " +
			"schema and data come by default, statistics too (--statistics is accepted as that default); leave a part out with --no-schema, --no-data or --no-statistics"
	}
	fs.StringVar(&c.restrictKey, "restrict-key", "", "not taken: plain-text scripts only (see docs/guide/pg-dump-flags.md)")
	fs.StringVarP(&c.encoding, "encoding", "E", "", "not taken: the archive holds the source's encoding and restore converts (see docs/guide/pg-dump-flags.md)")
	fs.BoolVar(&c.loadViaRoot, "load-via-partition-root", false, "not taken: pgsprint loads each partition itself (see docs/guide/pg-dump-flags.md)")
	if c.cmd == "restore" {
		fs.BoolVar(&ob.NoTablespaces, "no-tablespaces", false, "do not restore tablespace assignments")
		fs.BoolVar(&ob.NoTableAccessMethod, "no-table-access-method", false, "do not restore table access methods")
		fs.BoolVar(&c.noToastCompression, "no-toast-compression", false, "not taken: give it to pgsprint dump")
		c.refused["no-toast-compression"] = "the TOAST compression clause is part of the archived table definitions: leave it out when dumping (pgsprint dump --no-toast-compression)"
	} else {
		fs.BoolVar(&ob.NoToastCompression, "no-toast-compression", false, "leave out TOAST compression methods")
	}
	switch c.cmd {
	case "dump":
		fs.BoolVar(&c.sessionAuthDump, "use-set-session-authorization", false, "not taken: give it to pgsprint restore")
		c.refused["use-set-session-authorization"] = "ownership is set when restoring, as for a pg_dump archive: use pgsprint restore --use-set-session-authorization"
		fs.BoolVar(&c.noTablespacesDump, "no-tablespaces", false, "not taken: give it to pgsprint restore (pg_dump ignores it for archives too)")
		fs.BoolVar(&c.noTableAMDump, "no-table-access-method", false, "not taken: give it to pgsprint restore (pg_dump ignores it for archives too)")
		fs.StringVarP(&c.format, "format", "F", "", "not taken: pgsprint writes its own archive format (see docs/guide/pg-dump-flags.md)")
		c.refused["no-tablespaces"] = "tablespace assignments are left out when restoring, as for a pg_dump archive (pg_dump ignores the flag for archive formats): use pgsprint restore --no-tablespaces"
		c.refused["no-table-access-method"] = "table access methods are left out when restoring, as for a pg_dump archive (pg_dump ignores the flag for archive formats): use pgsprint restore --no-table-access-method"
		c.refused["format"] = "pgsprint dump writes one format, its own archive (read by pgsprint restore, list and verify): for a plain SQL script run pgsprint restore -f FILE --to-sql; for a pg_restore archive use pg_dump"
	case "clone":
		fs.BoolVar(&ob.NoTablespaces, "no-tablespaces", false, "do not copy tablespace assignments")
		fs.BoolVar(&ob.NoTableAccessMethod, "no-table-access-method", false, "do not copy table access methods")
	}
	fs.BoolVar(&c.statistics, "statistics", false, "carry optimizer statistics: the default (PostgreSQL 18+), accepted as pg_dump's and pg_restore's")
	if c.cmd != "dump" {
		fs.BoolVar(&c.ifExists, "if-exists", false, "with --clean: drop with IF EXISTS (always so: accepted for pg_restore's sake)")
	}
}

// apply checks the flags that were given and turns --section and --filter
// into f's selection. set says whether a flag was given; clean is --clean.
func (c *compatFlags) apply(fs *pflag.FlagSet, f *filter.Options, clean bool) error {
	var refused []string
	for name := range c.refused {
		if fs.Changed(name) {
			refused = append(refused, name)
		}
	}
	sort.Strings(refused)
	if len(refused) > 0 {
		fl := fs.Lookup(refused[0])
		name := "--" + fl.Name
		if fl.Shorthand != "" {
			name = "-" + fl.Shorthand + "/" + name
		}
		return usageError{fmt.Errorf("%s is not supported by pgsprint %s: %s", name, c.cmd, c.refused[refused[0]])}
	}
	if c.statistics && fs.Changed("no-statistics") {
		return usageError{fmt.Errorf("--statistics and --no-statistics cannot be used together")}
	}
	if err := c.applyParts(fs, f); err != nil {
		return usageError{err}
	}
	if fl := fs.Lookup("transaction-size"); fl != nil && fs.Changed("transaction-size") {
		if n, err := strconv.Atoi(fl.Value.String()); err != nil || n < 1 {
			return usageError{fmt.Errorf("--transaction-size must be in range 1..%d", math.MaxInt32)}
		}
	}
	if c.ifExists && !clean {
		return usageError{fmt.Errorf("--if-exists requires --clean (as in pg_restore)")}
	}
	if err := c.applySections(f); err != nil {
		return usageError{err}
	}
	tool := map[string]filter.Tool{"dump": filter.ForDump, "restore": filter.ForRestore, "clone": filter.ForClone}[c.cmd]
	for _, name := range c.filterFile {
		if err := readFilterFile(f, name, tool); err != nil {
			return usageError{err}
		}
	}
	return nil
}

// applyParts turns pg_dump 18's --no-data, --no-schema and
// --statistics-only into f's selection, refusing the combinations pg_dump
// refuses. --no-data is --schema-only that keeps the statistics, and
// --no-schema --data-only that keeps them; both together leave the
// statistics alone, as --statistics-only does.
func (c *compatFlags) applyParts(fs *pflag.FlagSet, f *filter.Options) error {
	for _, p := range []struct {
		on       bool
		a, b     string
		conflict bool
	}{
		{c.noData, "-a/--data-only", "--no-data", f.DataOnly},
		{c.noSchema, "-s/--schema-only", "--no-schema", f.SchemaOnly},
		{c.statisticsOnly, "-s/--schema-only", "--statistics-only", f.SchemaOnly},
		{c.statisticsOnly, "-a/--data-only", "--statistics-only", f.DataOnly},
		{c.statisticsOnly, "--statistics-only", "--no-statistics", fs.Changed("no-statistics")},
		{c.statistics, "-s/--schema-only", "--statistics", f.SchemaOnly},
		{c.statistics, "-a/--data-only", "--statistics", f.DataOnly},
	} {
		if p.on && p.conflict {
			return fmt.Errorf("options %s and %s cannot be used together", p.a, p.b)
		}
	}
	switch {
	case c.statisticsOnly || (c.noData && c.noSchema):
		if fs.Changed("no-statistics") {
			return fmt.Errorf("--no-data and --no-schema with --no-statistics leave nothing")
		}
		f.StatisticsOnly = true
	case c.noData && !f.SchemaOnly:
		f.SchemaOnly, f.KeepStatistics = true, true
	case c.noSchema && !f.DataOnly:
		f.DataOnly, f.KeepStatistics = true, true
	}
	if f.StatisticsOnly && len(c.sections) > 0 {
		return fmt.Errorf("--section cannot be used with --statistics-only")
	}
	return nil
}

// readFilterFile adds the selection of the filter file name ("-": standard
// input, as pg_dump) to f.
func readFilterFile(f *filter.Options, name string, tool filter.Tool) error {
	if name == "-" {
		return f.ReadFile(os.Stdin, "(standard input)", tool)
	}
	file, err := listfile.Open("--filter", name)
	if err != nil {
		return err
	}
	defer file.Close()
	return f.ReadFile(file, name, tool)
}

// applySections turns pg_dump's --section values into what pgsprint does
// with them: data alone is --data-only, pre-data and post-data together
// are --schema-only, all three (or none) everything. A dump may also stop
// at pre-data (with or without data); other parts alone would need a
// target holding the rest, which restore does not take.
func (c *compatFlags) applySections(f *filter.Options) error {
	if len(c.sections) == 0 {
		return nil
	}
	var pre, data, post bool
	for _, s := range c.sections {
		switch s {
		case "pre-data":
			pre = true
		case "data":
			data = true
		case "post-data":
			post = true
		default:
			return fmt.Errorf("unrecognized section name: %q (want pre-data, data or post-data)", s)
		}
	}
	if f.SchemaOnly || f.DataOnly {
		return fmt.Errorf("--section cannot be used with --schema-only or --data-only")
	}
	switch {
	case pre && data && post:
	case data && !pre && !post:
		f.DataOnly = true
	case pre && post && !data:
		f.SchemaOnly = true
	case c.cmd == "dump" && pre && !post:
		f.Sections = []string{"pre-data"}
		f.SchemaOnly = !data
	default:
		var names []string
		for _, s := range []struct {
			on   bool
			name string
		}{{pre, "pre-data"}, {data, "data"}, {post, "post-data"}} {
			if s.on {
				names = append(names, s.name)
			}
		}
		return fmt.Errorf("--section %s is not supported by pgsprint %s: it builds post-data (indexes, constraints) right after each table's data, "+
			"so it takes data alone (--data-only), pre-data with post-data (--schema-only), all three, or, for dump, pre-data with or without data",
			strings.Join(names, " --section "), c.cmd)
	}
	return nil
}
