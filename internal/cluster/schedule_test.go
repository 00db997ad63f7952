package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pgsprint/pgsprint/internal/archive"
)

// TestSchedule runs schedule with restores that only sleep and checks the
// bounds it promises: the big databases never hold more than jobs
// connections and all of them never more than 2*jobs; the biggest gets
// all of jobs (its share); the small ones restore beside it (all ten are
// done before it is); every database runs exactly once; and the first
// failure stops dispatch.
func TestSchedule(t *testing.T) {
	const jobs = 2
	dbs := []archive.Database{{Name: "huge", SizeBytes: 40 * smallDatabase}, {Name: "mid", SizeBytes: 2 * smallDatabase}}
	for i := range 10 {
		dbs = append(dbs, archive.Database{Name: fmt.Sprint("small", i), SizeBytes: smallDatabase / 4})
	}
	var mu sync.Mutex
	var bigConns, allConns, maxBig, maxAll int
	var order []string
	ran := map[string]int{}
	g, gctx := errgroup.WithContext(context.Background())
	schedule(gctx, g, dbs, jobs, func(d archive.Database, n int) error {
		big := d.SizeBytes >= smallDatabase
		mu.Lock()
		order = append(order, d.Name)
		ran[d.Name]++
		if big {
			bigConns += n
		} else if n != 1 {
			t.Errorf("small database %s got %d connections", d.Name, n)
		}
		allConns += n
		maxBig, maxAll = max(maxBig, bigConns), max(maxAll, allConns)
		mu.Unlock()
		wait := 5 * time.Millisecond
		if d.Name == "huge" {
			wait = 200 * time.Millisecond
			if n != jobs {
				t.Errorf("huge got %d connections, want %d", n, jobs)
			}
		}
		time.Sleep(wait)
		mu.Lock()
		defer mu.Unlock()
		if d.Name == "huge" && ran["small9"] == 0 {
			t.Error("the small databases did not restore beside the huge one")
		}
		if big {
			bigConns -= n
		}
		allConns -= n
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if maxBig > jobs || maxAll > 2*jobs {
		t.Errorf("connections at once: %d for the big databases (max %d), %d in all (max %d)", maxBig, jobs, maxAll, 2*jobs)
	}
	if len(ran) != len(dbs) {
		t.Errorf("ran %v", order)
	}
	for name, n := range ran {
		if n != 1 {
			t.Errorf("%s ran %d times", name, n)
		}
	}

	// A failure stops dispatch: with one connection, not every database
	// of many starts.
	g, gctx = errgroup.WithContext(context.Background())
	var started int
	schedule(gctx, g, dbs, 1, func(d archive.Database, n int) error {
		mu.Lock()
		started++
		mu.Unlock()
		if d.Name == "small0" {
			return errors.New("boom")
		}
		time.Sleep(10 * time.Millisecond)
		return nil
	})
	if err := g.Wait(); err == nil || err.Error() != "boom" || started == len(dbs) {
		t.Errorf("after a failure: %v, %d of %d started", err, started, len(dbs))
	}
}
