package clone

import (
	"context"

	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/mask"
	"github.com/pgsprint/pgsprint/internal/restore"
	"github.com/pgsprint/pgsprint/internal/subset"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// Contents reads the schema entries a clone with opts would create
// (restore.Contents of the source's pg_dump --schema-only, read in a
// snapshot as the clone reads it, its selection applied as the clone
// applies it): what preflight clone reads to say what the target lacks,
// as preflight restore does from an archive. No row is read, nothing is
// written anywhere.
func Contents(ctx context.Context, opts Options) ([]toc.Entry, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	so := sessionOptions(opts)
	so.Jobs, so.NoStatistics, so.Subset, so.Mask = 1, true, subset.Spec{}, mask.Spec{} // the schema is whole either way
	sess, err := dump.Begin(ctx, so)
	if err != nil {
		return nil, explainSnapshot(err, opts)
	}
	defer sess.Close(ctx)
	ro := opts.Options
	if ro.Filter, err = sess.ExpandFilter(ctx, ro.Filter); err != nil {
		return nil, err
	}
	src := newLiveSource(ctx, sess)
	defer src.close()
	return restore.Contents(ctx, src, ro)
}
