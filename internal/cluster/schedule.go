package cluster

import (
	"context"
	"sort"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// smallDatabase is the size (pg_database_size on the source) under which a
// database's restore is mostly fixed latency rather than work: CREATE
// DATABASE (hundreds of milliseconds of fsyncs on the target), the
// pg_restore processes that each read its schema, a few round trips per
// table. Such a database restores on one connection beside the big ones,
// outside their share of -j (see schedule).
const smallDatabase = 64 << 20

// schedule restores dbs on g, several at once, calling one with each
// database and its connections. A big database (smallDatabase or more)
// takes its share of jobs connections (jobsFor, among the big ones), and
// the big ones together never use more than jobs. A small one takes one
// connection, and they may run beside the big ones up to 2*jobs
// connections in all: a small restore mostly waits on the server, so on a
// server of one huge database and many small ones the small ones restore
// while the huge one loads, instead of after it. The biggest databases
// start first (the longest restore never starts last); the small ones
// start once the first big one has its connections, and take whatever it
// leaves. Dispatch stops at the first failure (g's context).
func schedule(ctx context.Context, g *errgroup.Group, dbs []archive.Database, jobs int, one func(d archive.Database, jobs int) error) {
	var big, small []archive.Database
	var total int64
	for _, d := range bySize(dbs) {
		if d.SizeBytes >= smallDatabase {
			big = append(big, d)
			total += d.SizeBytes
		} else {
			small = append(small, d)
		}
	}
	heavy := semaphore.NewWeighted(int64(jobs))
	all := semaphore.NewWeighted(int64(2 * jobs))
	// start runs d on n connections once acquired; false when dispatch
	// must stop (ctx ended: a database failed, or the run was
	// interrupted; g.Wait says which).
	start := func(d archive.Database, n int, sems ...*semaphore.Weighted) bool {
		for i, s := range sems {
			if err := s.Acquire(ctx, int64(n)); err != nil {
				for _, held := range sems[:i] {
					held.Release(int64(n))
				}
				g.Go(func() error { return err })
				return false
			}
		}
		g.Go(func() error {
			defer func() {
				for _, s := range sems {
					s.Release(int64(n))
				}
			}()
			return one(d, n)
		})
		return true
	}
	first := make(chan struct{}) // closed once the biggest database has its connections
	g.Go(func() error {
		defer func() {
			select {
			case <-first:
			default:
				close(first)
			}
		}()
		for i, d := range big {
			if !start(d, jobsFor(d.SizeBytes, total, jobs), heavy, all) {
				return nil
			}
			if i == 0 {
				close(first)
			}
		}
		return nil
	})
	g.Go(func() error {
		select {
		case <-first:
		case <-ctx.Done():
			return nil
		}
		for _, d := range small {
			if !start(d, 1, all) {
				return nil
			}
		}
		return nil
	})
}

// bySize orders databases largest first, so that the longest restore
// never starts last.
func bySize(dbs []archive.Database) []archive.Database {
	out := append([]archive.Database(nil), dbs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].SizeBytes > out[j].SizeBytes })
	return out
}

// jobsFor is a database's share of the connections: in proportion to its
// size, at least one.
func jobsFor(size, total int64, jobs int) int {
	if total <= 0 {
		return 1
	}
	n := int((size*int64(jobs) + total/2) / total)
	return min(max(n, 1), jobs)
}
