package remotetest

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Fault is what the proxy does to one request.
type Fault int

const (
	// Pass forwards the request untouched.
	Pass Fault = iota
	// SlowDown answers 503 SlowDown, S3's throttling reply, without
	// forwarding.
	SlowDown
	// InternalError answers 500 InternalError without forwarding.
	InternalError
	// CutBody forwards the request and cuts the connection halfway
	// through the response body, as a reset link does.
	CutBody
)

// Proxy is a reverse proxy on 127.0.0.1 in front of a real server that
// injects faults into chosen requests. The Host header is kept, so S3
// signatures made for the proxy's address still verify.
type Proxy struct {
	// URL is the proxy's address, to use as the endpoint.
	URL string
	srv *httptest.Server

	mu       sync.Mutex
	choose   func(r *http.Request, n int) Fault
	n        int
	injected map[Fault]int
}

// NewProxy starts a proxy to target, passing everything until SetFaults.
func NewProxy(t testing.TB, target string) *Proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{injected: map[Fault]int{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Header.Get("X-Pgsprint-Cut") != "" && resp.ContentLength > 1 {
			resp.Body = &cutReader{r: resp.Body, left: resp.ContentLength / 2}
		}
		return nil
	}
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if errors.Is(err, errCut) {
			panic(http.ErrAbortHandler) // drops the connection mid-body
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p.fault(r) {
		case SlowDown:
			s3Error(w, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
			return
		case InternalError:
			s3Error(w, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
			return
		case CutBody:
			// Marks the request for ModifyResponse; the server ignores
			// an unsigned header.
			r.Header.Set("X-Pgsprint-Cut", "1")
		}
		rp.ServeHTTP(w, r)
	}))
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// SetFaults makes choose decide each request's fault from now on; n counts
// requests from 1 since this call. nil passes everything.
func (p *Proxy) SetFaults(choose func(r *http.Request, n int) Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.choose, p.n = choose, 0
}

// Injected is how many requests got fault f.
func (p *Proxy) Injected(f Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[f]
}

// Close stops the proxy: its connections are cut, new ones refused.
func (p *Proxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

func (p *Proxy) fault(r *http.Request) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.choose == nil {
		return Pass
	}
	p.n++
	f := p.choose(r, p.n)
	if f != Pass {
		p.injected[f]++
	}
	return f
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>`+msg+`</Message></Error>`)
}

var errCut = errors.New("remotetest: body cut")

// cutReader ends a response body with an error after left bytes.
type cutReader struct {
	r    io.ReadCloser
	left int64
}

func (c *cutReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errCut
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

func (c *cutReader) Close() error { return c.r.Close() }
