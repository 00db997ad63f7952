package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/subset"
)

// subsetFlags are dump's and clone's development-copy flags: --subset and
// the flags that shape it (internal/subset).
type subsetFlags struct {
	seeds    []string
	children bool
	others   string
	refs     []string
	files    []string
}

func (s *subsetFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&s.seeds, "subset", nil, "keep only the rows of this table matching this condition, 'schema.table: WHERE-condition', and every row they reference, transitively (repeatable; see docs/guide/development-copies.md)")
	fs.BoolVar(&s.children, "subset-children", false, "with --subset: keep the rows that reference the chosen rows too (an order's lines), transitively downward from the --subset tables")
	fs.StringVar(&s.others, "subset-others", subset.OthersAll, "with --subset: tables no rule reaches keep all their rows (all) or none (none); kept rows bring the rows they reference")
	fs.StringArrayVar(&s.refs, "subset-ref", nil, "with --subset: follow a reference the schema does not declare, 'schema.child(col, ...) -> schema.parent(col, ...)' (repeatable)")
	fs.StringArrayVar(&s.files, "subset-file", nil, "read subset rules from this file, one a line: 'subset TABLE: CONDITION', 'ref CHILD(COLS) -> PARENT(COLS)', 'children', 'others all|none'")
}

// spec is what the flags and files ask for; an error is a usage error.
func (s *subsetFlags) spec(fs *pflag.FlagSet) (subset.Spec, error) {
	var spec subset.Spec
	for _, f := range s.files {
		if err := subset.ReadFile(f, &spec); err != nil {
			return spec, usageError{err}
		}
	}
	for _, v := range s.seeds {
		seed, err := subset.ParseSeed(v)
		if err != nil {
			return spec, usageError{err}
		}
		spec.Seeds = append(spec.Seeds, seed)
	}
	for _, v := range s.refs {
		ref, err := subset.ParseRef(v)
		if err != nil {
			return spec, usageError{err}
		}
		spec.Refs = append(spec.Refs, ref)
	}
	spec.Children = spec.Children || s.children
	if fs.Changed("subset-others") || spec.Others == "" {
		others, err := subset.ParseOthers(s.others)
		if err != nil {
			return spec, usageError{err}
		}
		spec.Others = others
	}
	if err := spec.Check(); err != nil {
		return spec, usageError{err}
	}
	return spec, nil
}

// checkSubsetWith refuses what a subset cannot be combined with beyond
// refuseOneRun's.
func checkSubsetWith(schemaOnly bool) error {
	if schemaOnly {
		return usageError{fmt.Errorf("--subset chooses rows: it does not take --schema-only")}
	}
	return nil
}
