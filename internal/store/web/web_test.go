package web

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remote"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// serve puts data at /a.pgsprint on a net/http file server, which answers
// range requests.
func serve(t *testing.T, data []byte) *httptest.Server {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.pgsprint"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv
}

var opts = remote.Options{Window: 256 << 10, Backoff: 5 * time.Millisecond}

func TestWebRanges(t *testing.T) {
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(rand.Uint32())
	}
	srv := serve(t, data)
	proxy := remotetest.NewProxy(t, srv.URL)
	b, err := Parse(proxy.URL+"/a.pgsprint?X-Amz-Signature=sekrit", nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s := b.String(); strings.Contains(s, "sekrit") {
		t.Fatalf("String shows the query: %s", s)
	}
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, size, ok := src.Random()
	if !ok || size != int64(len(data)) {
		t.Fatalf("Random: %v %d", ok, size)
	}
	// Every other ranged request is cut halfway: each is retried.
	proxy.SetFaults(func(r *http.Request, n int) remotetest.Fault {
		if n%2 == 1 {
			return remotetest.CutBody
		}
		return remotetest.Pass
	})
	var ranges []store.Range
	var want []byte
	for off := int64(5); off+50000 < size; off += 150000 {
		ranges = append(ranges, store.Range{Off: off, Len: 50000})
		want = append(want, data[off:off+50000]...)
	}
	rr := r.(store.RangeReader).ReadRanges(ranges)
	got, err := io.ReadAll(rr)
	rr.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("ReadRanges through cut responses: %v (%d bytes, want %d)", err, len(got), len(want))
	}
	if proxy.Injected(remotetest.CutBody) == 0 {
		t.Fatal("no response was cut")
	}
	p := make([]byte, 100)
	if n, err := r.ReadAt(p, size-100); n != 100 || err != nil || !bytes.Equal(p, data[len(data)-100:]) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
}

func TestWebRefusals(t *testing.T) {
	srv := serve(t, []byte("archive"))
	missing, _ := Parse(srv.URL+"/absent?sig=sekrit", nil, opts)
	if _, err := missing.Open(context.Background()); !errors.Is(err, store.ErrNotFound) || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("missing URL: %v", err)
	}
	if _, err := missing.Create(context.Background(), store.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "cannot write an archive to an http(s) URL") {
		t.Errorf("create: %v", err)
	}
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	defer forbidden.Close()
	fb, _ := Parse(forbidden.URL+"/a", nil, opts)
	var ae *store.AccessError
	if _, err := fb.Open(context.Background()); !errors.As(err, &ae) {
		t.Errorf("403: %v, want an access error", err)
	}
	forbidden.Close()
	if _, err := fb.Open(context.Background()); !errors.As(err, &ae) || !strings.Contains(err.Error(), "cannot reach the server") {
		t.Errorf("closed server: %v, want an access error", err)
	}
}

// A server that ignores Range sends the whole archive, read front to back.
func TestWebNoRanges(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "whole archive")
	}))
	defer srv.Close()
	b, _ := Parse(srv.URL+"/a", nil, opts)
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, _, ok := src.Random(); ok {
		t.Fatal("Random without range support")
	}
	if got, err := io.ReadAll(src.Sequential()); err != nil || string(got) != "whole archive" {
		t.Fatalf("Sequential: %q %v", got, err)
	}
}

// TestWebCutMessage: a response cut off every time ends in a message that
// says the server's response was cut off, and after how many bytes, not a
// bare "unexpected EOF".
func TestWebCutMessage(t *testing.T) {
	data := make([]byte, 256<<10)
	srv := serve(t, data)
	proxy := remotetest.NewProxy(t, srv.URL)
	b, err := Parse(proxy.URL+"/a.pgsprint", nil, remote.Options{Window: 64 << 10, Backoff: time.Millisecond, Attempts: 1}) // one try: a retry asks for the rest, which the proxy cuts before its headers
	if err != nil {
		t.Fatal(err)
	}
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, _, _ := src.Random()
	proxy.SetFaults(func(*http.Request, int) remotetest.Fault { return remotetest.CutBody })
	for _, tc := range []struct {
		n    int
		want string
	}{
		{48 << 10, ": reading 49152 bytes at offset 1000: the server's response was cut off after "}, // some of the body came
		{2048, ": the server closed the connection without answering"},                               // the proxy hung up before its headers
	} {
		_, err := r.ReadAt(make([]byte, tc.n), 1000)
		t.Logf("%v", err)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "EOF") {
			t.Errorf("error %v, want one saying %q, without \"EOF\"", err, tc.want)
		}
	}
}
