package follow

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// onFence is an io.Writer that runs do once, synchronously, when the
// fence line says the source is read-only: what do breaks happens under
// the fence, before the catch-up.
type onFence struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
	do   func()
}

func (w *onFence) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte("is read-only for new sessions")) {
		w.once.Do(w.do)
	}
	return w.buf.Write(p)
}

// TestStallUnderFence: the subscription is disabled right after the
// fence, with writes the target has not applied: the catch-up makes no
// progress, and after --stall-timeout (not --timeout) finish lifts the
// fence and fails saying the source is writable again; the follow is
// kept, and a rerun (which enables the subscription) hands over with the
// target equal to the source.
func TestStallUnderFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := sharedLogical(t)
	o := newCase(t, c, cutoverSQL)
	following(t, o)
	exec(t, o.Source, "INSERT INTO keyed SELECT i, 'before the fence' FROM generate_series(1001, 1100) i")
	dst := o.Target
	w := &onFence{do: func() {
		// The worker stops first, then a write gets past the fence
		// (as a transaction under way in the grace would): the
		// target has something to catch up on that it never gets.
		exec(t, dst, "ALTER SUBSCRIPTION "+o.Names.Slot+" DISABLE")
		waitFor(t, dst, "0", "SELECT count(*)::text FROM pg_stat_subscription WHERE subname = $1 AND pid IS NOT NULL", o.Names.Slot)
		withConn(t, o.Source, func(ctx context.Context, conn *pgx.Conn) {
			for _, q := range []string{"SET default_transaction_read_only = off", "INSERT INTO keyed VALUES (2001, 'under the fence')"} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Errorf("%s: %v", q, err)
				}
			}
		})
	}}
	fo := FinishOptions{Source: o.Source, Target: o.Target, Names: o.Names, Timeout: time.Minute, StallTimeout: 2 * time.Second,
		Grace: 100 * time.Millisecond, Out: w, Verify: sameData(o.Source, o.Target)}
	began := time.Now()
	_, err := Finish(ctx, fo)
	if err == nil {
		t.Fatalf("Finish passed with the subscription disabled under the fence\n%s", w.buf.String())
	}
	if !strings.Contains(w.buf.String(), "fence:") {
		t.Fatalf("Finish did not fence (%v)\n%s", err, w.buf.String())
	}
	if d := time.Since(began); d > 30*time.Second {
		t.Errorf("Finish gave up after %s: the stall timeout is 2s", d)
	}
	if !strings.Contains(err.Error(), "the source is writable again") {
		t.Errorf("Finish: %v; want it to say the source is writable again", err)
	}
	if fenced(t, o.Source) {
		t.Error("the source is still fenced after the stall")
	}
	if v := scalar(t, o.Target, "SELECT count(*)::text FROM pg_subscription WHERE subname = $1", o.Names.Slot); v != "1" {
		t.Fatal("the follow is gone after the stall")
	}
	fo.Out, fo.StallTimeout = nil, 0
	if _, err := Finish(ctx, fo); err != nil {
		t.Fatalf("Finish again: %v", err)
	}
	nothingLeft(t, o.Source, o.Target, o.Names)
}
