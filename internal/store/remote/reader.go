// Package remote is what the readers of remote archives (an S3 object, an
// https URL) share: an io.ReaderAt over ranged requests, retried with
// backoff when the failure is transient, and a read-ahead of the frames a
// stream reader announces (store.RangeReader), coalesced into requests of
// a few MiB with several in flight and a bounded amount of memory.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/pgsprint/pgsprint/internal/store"
)

// FetchFunc reads len(p) bytes at off into p with one request and returns
// how many it read before failing: a connection reset mid-body leaves n
// good bytes, and the retry asks for the rest only.
type FetchFunc func(ctx context.Context, off int64, p []byte) (n int, err error)

// Options size the read-ahead and the retries. Zero values take the
// defaults below.
type Options struct {
	// Window is the largest request: neighbouring frames are coalesced up
	// to it (default 4 MiB).
	Window int64
	// Gap is the largest run of other streams' bytes fetched and dropped
	// to join two frames into one request (default 64 KiB).
	Gap int64
	// Ahead is how many requests one stream has in flight (default 4), so
	// a stream holds at most Ahead × Window bytes.
	Ahead int
	// Attempts bounds the tries of one range (default 6).
	Attempts int
	// Backoff is the first wait between tries, doubled each time up to
	// 5 s, with jitter (default 200 ms).
	Backoff time.Duration
}

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = 4 << 20
	}
	if o.Gap < 0 {
		o.Gap = 0
	} else if o.Gap == 0 {
		o.Gap = 64 << 10
	}
	if o.Ahead <= 0 {
		o.Ahead = 4
	}
	if o.Attempts <= 0 {
		o.Attempts = 6
	}
	if o.Backoff <= 0 {
		o.Backoff = 200 * time.Millisecond
	}
	return o
}

// Reader is random access to a remote object of known size. It is safe
// for concurrent use: every call makes its own requests.
type Reader struct {
	ctx       context.Context
	fetch     FetchFunc
	transient func(error) bool
	size      int64
	opts      Options
}

// NewReader reads an object of size bytes through fetch; transient says
// which errors are worth another try (throttling, 5xx, a reset). ctx
// bounds every request: cancelling it stops them all.
func NewReader(ctx context.Context, size int64, fetch FetchFunc, transient func(error) bool, opts Options) *Reader {
	return &Reader{ctx: ctx, fetch: fetch, transient: transient, size: size, opts: opts.withDefaults()}
}

// Size is the object's size in bytes.
func (r *Reader) Size() int64 { return r.size }

// ReadAt implements io.ReaderAt with one request (retried as needed).
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	var eof error
	if rest := r.size - off; int64(len(p)) > rest {
		p, eof = p[:rest], io.EOF
	}
	if err := r.get(r.ctx, off, p); err != nil {
		return 0, err
	}
	return len(p), eof
}

// get fills p from off, retrying transient failures with backoff; each
// retry asks only for the bytes still missing.
func (r *Reader) get(ctx context.Context, off int64, p []byte) error {
	done := 0
	delay := r.opts.Backoff
	for attempt := 1; ; attempt++ {
		n, err := r.fetch(ctx, off+int64(done), p[done:])
		done += n
		if err == nil && done == len(p) {
			return nil
		}
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n > 0 {
			attempt = 1 // progress: a long range on a flaky link is not doomed
		}
		if !r.transient(err) || attempt >= r.opts.Attempts {
			if attempt > 1 {
				return fmt.Errorf("%w (after %d tries)", err, attempt)
			}
			return err
		}
		wait := delay/2 + rand.N(delay/2+1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// ReadRanges implements store.RangeReader.
func (r *Reader) ReadRanges(ranges []store.Range) io.ReadCloser {
	ctx, cancel := context.WithCancel(r.ctx)
	return &aheadReader{r: r, ctx: ctx, cancel: cancel, reqs: coalesce(ranges, r.opts.Window, r.opts.Gap)}
}

// request is one coalesced GET: the span [off, off+n) and the ranges in
// it, in order.
type request struct {
	off, n int64
	parts  []store.Range
	done   chan struct{}
	data   []byte
	err    error
}

// coalesce joins neighbouring ranges (ascending, at most gap bytes apart)
// into requests of at most window bytes; a range larger than window is a
// request of its own.
func coalesce(ranges []store.Range, window, gap int64) []*request {
	var reqs []*request
	var cur *request
	for _, rg := range ranges {
		if rg.Len <= 0 {
			continue
		}
		if cur != nil {
			end := cur.off + cur.n
			if rg.Off >= end && rg.Off-end <= gap && rg.Off+rg.Len-cur.off <= window {
				cur.n = rg.Off + rg.Len - cur.off
				cur.parts = append(cur.parts, rg)
				continue
			}
		}
		cur = &request{off: rg.Off, n: rg.Len, parts: []store.Range{rg}}
		reqs = append(reqs, cur)
	}
	return reqs
}

// aheadReader hands out the announced ranges in order while keeping up to
// Ahead requests in flight.
type aheadReader struct {
	r      *Reader
	ctx    context.Context
	cancel context.CancelFunc
	reqs   []*request
	next   int // first request not yet started
	cur    int // request being read
	part   int // range being read within it
	pos    int64
	err    error
}

// start keeps Ahead requests in flight from cur on.
func (a *aheadReader) start() {
	for a.next < len(a.reqs) && a.next < a.cur+a.r.opts.Ahead {
		q := a.reqs[a.next]
		a.next++
		q.done = make(chan struct{})
		go func() {
			defer close(q.done)
			if q.off+q.n > a.r.size {
				q.err = fmt.Errorf("range %d+%d is past the end of the object (%d bytes)", q.off, q.n, a.r.size)
				return
			}
			buf := make([]byte, q.n)
			if err := a.r.get(a.ctx, q.off, buf); err != nil {
				q.err = err
				return
			}
			q.data = buf
		}()
	}
}

// Read implements io.Reader.
func (a *aheadReader) Read(p []byte) (int, error) {
	if a.err != nil {
		return 0, a.err
	}
	for {
		if a.cur >= len(a.reqs) {
			a.err = io.EOF
			return 0, io.EOF
		}
		a.start()
		q := a.reqs[a.cur]
		select {
		case <-q.done:
		case <-a.ctx.Done():
			a.err = a.ctx.Err()
			return 0, a.err
		}
		if q.err != nil {
			a.err = q.err
			return 0, a.err
		}
		if a.part < len(q.parts) {
			rg := q.parts[a.part]
			lo := rg.Off - q.off + a.pos
			n := copy(p, q.data[lo:rg.Off-q.off+rg.Len])
			a.pos += int64(n)
			if a.pos == rg.Len {
				a.part, a.pos = a.part+1, 0
			}
			if n > 0 || len(p) == 0 {
				return n, nil
			}
			continue
		}
		q.data = nil // release it before the next request is awaited
		a.cur, a.part, a.pos = a.cur+1, 0, 0
	}
}

// Close stops the requests in flight.
func (a *aheadReader) Close() error {
	a.cancel()
	if a.err == nil {
		a.err = errors.New("read after close")
	}
	return nil
}
