package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/filter"
)

// The flags in this file are pg_dump's and pg_restore's, with their
// meaning where it is the same for pgsprint, and a one-line usage error
// saying why where it is not: a DBA's fingers type them, and "unknown flag"
// helps no one. README's flag table lists every one.

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
}

// register adds the flags to fs for f's command (f.Objects and the
// selection they feed travel in the command's filter options).
func (c *compatFlags) register(fs *pflag.FlagSet, f *filter.Options) {
	live := c.cmd != "restore" // reads a source database
	ob := &f.Objects
	fs.StringArrayVar(&c.sections, "section", nil, "only this part: pre-data, data or post-data (repeatable, as pg_dump; which combinations work: README's flag table)")
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
	c.refused = map[string]string{
		"encoding": "pgsprint archives always hold table data in the source database's encoding, and restore converts it to the target's (a --to-sql script names the encoding of each part): -E has no meaning here",
		"load-via-partition-root": "pgsprint loads each partition's rows into that partition, in parallel and journaled by chunk; " +
			"for a target that routes rows differently, use pg_dump --load-via-partition-root",
	}
	fs.StringVarP(&c.encoding, "encoding", "E", "", "not taken: the archive holds the source's encoding and restore converts (see README)")
	fs.BoolVar(&c.loadViaRoot, "load-via-partition-root", false, "not taken: pgsprint loads each partition itself (see README)")
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
		fs.BoolVar(&c.noTablespacesDump, "no-tablespaces", false, "not taken: give it to pgsprint restore (pg_dump ignores it for archives too)")
		fs.BoolVar(&c.noTableAMDump, "no-table-access-method", false, "not taken: give it to pgsprint restore (pg_dump ignores it for archives too)")
		fs.StringVarP(&c.format, "format", "F", "", "not taken: pgsprint writes its own archive format (see README)")
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

// readFilterFile adds the selection of the filter file name ("-": standard
// input, as pg_dump) to f.
func readFilterFile(f *filter.Options, name string, tool filter.Tool) error {
	if name == "-" {
		return f.ReadFile(os.Stdin, "(standard input)", tool)
	}
	file, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("could not open filter file: %w", err)
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
