package restore

import (
	"context"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// Contents reads the schema entries a restore of ar with opts would
// create (its filters and -L applied, as for an empty database), each with
// its SQL as pg_restore would run it and its dependencies, in the
// archive's order: what preflight reads to say what the target lacks
// (an extension, a collation provider, a role) and which objects a
// --keep-going restore would then skip. It reads the table of contents
// as --keep-going does (keepGoing.loadTOC), so that the two agree on
// which objects depend on which; nothing is written anywhere.
func Contents(ctx context.Context, ar archive.Source, opts Options) ([]toc.Entry, error) {
	schema, cleanup, err := offlineSchema(ctx, ar, opts)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	sel := &selection{}
	if opts.Filter.Partial() || opts.UseList != "" {
		if sel, err = choose(ctx, opts, ar.Manifest(), schema, nil, logger(opts.Logger), func(...uint32) {}); err != nil {
			return nil, err
		}
		defer sel.remove()
	}
	var k keepGoing
	if err := k.loadTOC(ctx, schema, sel); err != nil {
		return nil, err
	}
	out := make([]toc.Entry, 0, len(k.order))
	for _, id := range k.order {
		out = append(out, *k.entries[id])
	}
	return out, nil
}
