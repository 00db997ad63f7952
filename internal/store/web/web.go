// Package web reads archives from http:// and https:// URLs: a pre-signed
// S3 URL, an internal web server with last night's dump. A server that
// answers range requests is read like a file, each stream's frames
// fetched ahead (remote.Reader); one that does not is read front to back,
// like a pipe. No credentials: whatever the URL carries is all there is,
// and it is never printed (String shows no query string).
package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remote"
)

// Backend is one http(s) URL.
type Backend struct {
	url    string
	name   string
	client *http.Client
	opts   remote.Options
}

// Parse reads an http:// or https:// URL. client nil is net/http's
// default transport, keeping more idle connections, with no overall
// timeout (a range may be large; the context bounds each).
func Parse(loc string, client *http.Client, opts remote.Options) (*Backend, error) {
	u, err := url.Parse(loc)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: not an http:// or https:// URL", redact(loc))
	}
	if client == nil {
		// A restore keeps up to 4 ranges in flight per connection: keep
		// their connections open between requests.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 128
		client = &http.Client{Transport: tr}
	}
	return &Backend{url: loc, name: redact(loc), client: client, opts: opts}, nil
}

// redact drops the query string and any user info, where pre-signed URLs
// and basic auth keep their secrets.
func redact(loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		if i := strings.IndexAny(loc, "?#"); i >= 0 {
			return loc[:i]
		}
		return loc
	}
	name := u.Scheme + "://" + u.Host + u.EscapedPath()
	if u.RawQuery != "" {
		name += "?…"
	}
	return name
}

// String implements store.Backend.
func (b *Backend) String() string { return b.name }

// Create implements store.Backend: a web server is read, not written.
func (b *Backend) Create(context.Context, store.CreateOptions) (store.Sink, error) {
	return nil, fmt.Errorf("%s: cannot write an archive to an http(s) URL (read-only: dump to a file or s3://bucket/key)", b)
}

// statusError is an HTTP answer other than the one asked for.
type statusError struct {
	code int
	name string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: the server answered %d %s", e.name, e.code, http.StatusText(e.code))
}

// transient says which failures another try may cure: 5xx, 429, a
// connection that failed or was cut short.
func transient(err error) bool {
	var se *statusError
	if errors.As(err, &se) {
		return se.code >= 500 || se.code == http.StatusTooManyRequests
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *store.AccessError
	if errors.As(err, &ae) {
		var de *net.DNSError
		return !errors.As(err, &de) // a refused or reset connection may recover; a name that does not resolve will not
	}
	return true // body read errors: a reset, an early EOF
}

// get sends one GET with the Range header rng ("" for none).
func (b *Backend) get(ctx context.Context, rng string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b, err)
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, secrets and all
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// Go's bare "EOF": the server was reached, and hung up.
			return nil, &store.AccessError{Err: fmt.Errorf("%s: the server closed the connection without answering", b)}
		}
		return nil, &store.AccessError{Err: fmt.Errorf("%s: cannot reach the server: %v", b, err)}
	}
	return resp, nil
}

// Open implements store.Backend: one GET of the first byte tells the size
// and whether ranges are served. A server that ignores ranges gives the
// whole archive, which is then read front to back.
func (b *Backend) Open(ctx context.Context) (store.Source, error) {
	resp, err := b.get(ctx, "bytes=0-0")
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return &source{seq: resp.Body}, nil
	case http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		resp.Body.Close()
		return nil, fmt.Errorf("%s: the archive is empty", b)
	case http.StatusNotFound, http.StatusGone:
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %w", b, store.ErrNotFound)
	case http.StatusUnauthorized, http.StatusForbidden:
		resp.Body.Close()
		return nil, &store.AccessError{Err: fmt.Errorf("%s: the server refused access (%d %s; an expired pre-signed URL?)", b, resp.StatusCode, http.StatusText(resp.StatusCode))}
	default:
		resp.Body.Close()
		return nil, &statusError{resp.StatusCode, b.name}
	}
	resp.Body.Close()
	cr := resp.Header.Get("Content-Range")
	_, total, _ := strings.Cut(cr, "/")
	size, err := strconv.ParseInt(total, 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("%s: unexpected Content-Range %q", b, cr)
	}
	validator := resp.Header.Get("ETag")
	if validator == "" || strings.HasPrefix(validator, "W/") {
		validator = resp.Header.Get("Last-Modified")
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fetch := func(ctx context.Context, off int64, p []byte) (int, error) {
		rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(p))-1, 10)
		req, err := b.get(ctx, rng)
		if err != nil {
			return 0, err
		}
		defer req.Body.Close()
		if req.StatusCode != http.StatusPartialContent {
			return 0, &statusError{req.StatusCode, b.name}
		}
		if v := req.Header.Get("ETag"); v != "" && !strings.HasPrefix(v, "W/") && validator != "" && v != validator {
			return 0, fmt.Errorf("%s: the archive changed while it was being read", b)
		}
		if cr := req.Header.Get("Content-Range"); !strings.HasPrefix(cr, "bytes "+rng[len("bytes="):]+"/") {
			return 0, fmt.Errorf("%s: asked for %s, got Content-Range %q", b, rng, cr)
		}
		n, err := io.ReadFull(req.Body, p)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("the server's response was cut off after %d bytes", n) // not Go's "unexpected EOF"
			}
			return n, fmt.Errorf("%s: reading %d bytes at offset %d: %w", b, len(p), off, err)
		}
		return n, nil
	}
	return &source{r: remote.NewReader(rctx, size, fetch, transient, b.opts), cancel: cancel}, nil
}

// source is an opened URL: random access over ranges, or the body of a
// server that sent it all.
type source struct {
	r      *remote.Reader
	cancel context.CancelFunc
	seq    io.ReadCloser
}

// Random implements store.Source.
func (s *source) Random() (io.ReaderAt, int64, bool) {
	if s.r == nil {
		return nil, 0, false
	}
	return s.r, s.r.Size(), true
}

// Sequential implements store.Source.
func (s *source) Sequential() io.Reader {
	if s.seq != nil {
		return s.seq
	}
	return io.NewSectionReader(s.r, 0, s.r.Size())
}

// Close implements store.Source.
func (s *source) Close() error {
	if s.cancel != nil {
		s.cancel()
	}
	if s.seq != nil {
		return s.seq.Close()
	}
	return nil
}
