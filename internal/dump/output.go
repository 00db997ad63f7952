package dump

import (
	"context"
	"fmt"

	"github.com/pgsprint/pgsprint/internal/progress"
	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/location"
)

// createOutput starts the archive at opts.File, whatever the medium.
func createOutput(ctx context.Context, opts Options, plan progress.Expected) (*output, error) {
	lo := opts.Location
	lo.Out = opts.Stdout
	b, err := location.Parse(opts.File, lo)
	if err != nil {
		return nil, err
	}
	// A dump replaces a file, as pg_dump replaces its -f file; an object
	// in a bucket only when asked (--overwrite).
	sink, err := b.Create(ctx, store.CreateOptions{SizeHint: plan.Bytes, Overwrite: opts.Overwrite})
	if err != nil {
		return nil, err
	}
	return &output{Sink: sink}, nil
}

// output is the archive being written. Its write errors are outputErrors,
// so that a worker tells a failure to write the archive from a lost
// server connection: both can be a broken pipe.
type output struct {
	store.Sink
}

func (o *output) Write(p []byte) (int, error) {
	n, err := o.Sink.Write(p)
	if err != nil {
		return n, outputError{err}
	}
	return n, nil
}

// outputError is a failure to write the archive, kept apart from a lost
// server connection.
type outputError struct{ error }

func (e outputError) Unwrap() error { return e.error }

// commit makes the archive visible at its location.
func (o *output) commit(ctx context.Context) error {
	if err := o.Sink.Commit(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("dump interrupted: %w", context.Cause(ctx))
		}
		return err
	}
	return nil
}
