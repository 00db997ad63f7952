package follow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsprint/pgsprint/internal/filter"
)

// ErrConninfoPassword is returned by Clone when Options.Conninfo is empty
// and the source connection uses a password: the subscription's
// connection string, built from it, would store that password in the
// target's catalog. The caller must say how the target server connects.
var ErrConninfoPassword = errors.New("the source connection uses a password, which the subscription's connection string would store in the target's catalog: give --follow-conninfo (without a password when the target server's OS user has a .pgpass for the source)")

// Clone runs copy, a clone of o.Source into o.Target, so that the target
// follows the source once it is copied: every requirement is checked and
// the publication and the slot are created first; copy must read the
// source in the slot's exported snapshot, which it is given and which is
// held until copy returns, and copy the selection it is given: o.Filter
// with the partitions of the partitioned tables it selects, whose changes
// the publication of those tables carries under the partitions' names.
// Then the target's subscription takes over from the slot, replaying
// every change made since that snapshot.
//
// If copy fails, the slot and the publication are removed (and any
// REPLICA IDENTITY FULL set back) and copy's error is returned as it is.
// If the subscription cannot be created, the clone is complete and the
// slot and publication are kept: the error says how to go on.
func Clone(ctx context.Context, o Options, copy func(ctx context.Context, snapshot string, f filter.Options) error) (*Started, error) {
	s, err := start(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := copy(ctx, s.Snapshot, s.filter); err != nil {
		// Removed even when ctx ended: an interrupted clone leaves no
		// slot holding WAL on the source.
		if cerr := s.cancel(context.WithoutCancel(ctx)); cerr != nil {
			return nil, fmt.Errorf("%w; and removing the follow's slot and publication failed: %v: run pgsprint follow abort", err, cerr)
		}
		return nil, err
	}
	if err := s.subscribe(ctx, o.Target); err != nil {
		return nil, err
	}
	return s, nil
}

// Watch reads the follow's state on both sides every interval until ctx
// ends and hands each reading, or the error reading it, to report: clone
// --follow --wait shows the lag while the target catches up. A reading
// cut short by ctx's end is not reported.
func Watch(ctx context.Context, src, dst *pgx.ConnConfig, n Names, interval time.Duration, report func(*State, error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st, err := ReadState(ctx, src, dst, n)
		if ctx.Err() != nil {
			return
		}
		report(st, err)
	}
}
