package pg

import (
	"context"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// Parallel works through items on jobs connections at once (at least
// one), each opened by connect and closed when the queue is empty: work
// takes items from the queue on its connection, so an item goes to the
// first connection free, in the order given, and work may keep what a
// connection needs across items. The first error cancels the others and
// is what Parallel returns. It is the one pool of the helpers that spread
// statements or reads over a server's connections (compare's fingerprint,
// sample's ExecParallel), where the restore and dump pools have their own
// scheduling.
func Parallel[T any](ctx context.Context, jobs int, items []T,
	connect func(context.Context) (*pgx.Conn, error),
	work func(ctx context.Context, conn *pgx.Conn, queue <-chan T) error) error {
	queue := make(chan T, len(items))
	for _, it := range items {
		queue <- it
	}
	close(queue)
	g, gctx := errgroup.WithContext(ctx)
	for range max(jobs, 1) {
		g.Go(func() error {
			conn, err := connect(gctx)
			if err != nil {
				return err
			}
			defer conn.Close(context.WithoutCancel(gctx))
			return work(gctx, conn, queue)
		})
	}
	return g.Wait()
}
