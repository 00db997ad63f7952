package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/filter"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/subset"
)

// rowFlags are the flags that choose and change the rows dump and clone
// read from a live database (--subset, --mask and the flags that shape
// them), with what they ask for once parsed. Embedded in both commands'
// options so the two read and refuse them alike.
type rowFlags struct {
	subset  subsetFlags
	spec    subset.Spec // what subset asks for
	mask    maskFlags
	masking mask.Spec // what mask asks for
}

func (r *rowFlags) registerRows(fs *pflag.FlagSet) {
	r.subset.register(fs)
	r.mask.register(fs)
}

// applyRows reads what the flags ask for once fs is parsed.
func (r *rowFlags) applyRows(fs *pflag.FlagSet) error {
	var err error
	if r.spec, err = r.subset.spec(fs); err != nil {
		return err
	}
	r.masking, err = r.mask.spec()
	return err
}

// checkRows refuses what a subset or masking cannot be combined with: each
// shapes the rows of one database in one run, so neither takes --all,
// --resume or --follow (refuseOneRun, saying why for each), and each has
// refusals of its own (checkSubsetWith, checkMaskWith).
func (r *rowFlags) checkRows(all, resume, follow bool, f filter.Selection, statistics bool) error {
	for _, c := range []struct {
		active                     bool
		flag, resumeWhy, followWhy string
		own                        func() error
	}{
		{r.spec.Active(), "--subset", "the rows are chosen anew by each run", "replication would bring every row's changes",
			func() error { return checkSubsetWith(f.SchemaOnly) }},
		{r.masking.Active(), "--mask", "a masked clone is started over (--clean)", "replication would bring the changes unmasked",
			func() error { return checkMaskWith(f, statistics) }},
	} {
		if !c.active {
			continue
		}
		if err := refuseOneRun(c.flag, all, resume, follow, c.resumeWhy, c.followWhy); err != nil {
			return err
		}
		if err := c.own(); err != nil {
			return err
		}
	}
	return nil
}

// refuseOneRun refuses what --mask and --subset, which each shape the rows
// of one database in one run, cannot be combined with: --all, --resume and
// --follow, each refusal saying why (resumeWhy, followWhy).
func refuseOneRun(flag string, all, resume, follow bool, resumeWhy, followWhy string) error {
	switch {
	case all:
		return usageError{fmt.Errorf("%s applies to one database: it does not take --all", flag)}
	case resume:
		return usageError{fmt.Errorf("%s does not take --resume: %s", flag, resumeWhy)}
	case follow:
		return usageError{fmt.Errorf("%s does not take --follow: %s", flag, followWhy)}
	}
	return nil
}
