package main

import (
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

// checkRows refuses what a subset or masking cannot be combined with (see
// checkSubsetWith and checkMaskWith).
func (r *rowFlags) checkRows(all, resume, follow bool, f filter.Selection, statistics bool) error {
	if err := checkSubsetWith(r.spec, all, resume, follow, f.SchemaOnly); err != nil {
		return err
	}
	return checkMaskWith(r.masking, all, resume, follow, f, statistics)
}
