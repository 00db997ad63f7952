package s3

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remote"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// TestS3Refusals: each permanent problem fails at once with one line that
// names the bucket and key and never the secret; credential and endpoint
// problems are *store.AccessError (exit 3).
func TestS3Refusals(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	bucket := srv.Bucket(t)
	present := "s3://" + bucket + "/present"
	b, _ := Parse(present, testConfig())
	if err := upload(t, b, randomBytes(1000), store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		loc      string
		env      map[string]string
		create   bool
		want     string
		access   bool
		notFound bool
	}{
		{name: "missing key", loc: "s3://" + bucket + "/absent", want: "s3://" + bucket + "/absent: archive not found", notFound: true},
		{name: "missing bucket read", loc: "s3://nobucket/k", want: `s3://nobucket/k: bucket "nobucket" does not exist`},
		{name: "missing bucket write", loc: "s3://nobucket/k", create: true, want: `s3://nobucket/k: bucket "nobucket" does not exist`},
		{name: "wrong secret read", loc: present, env: map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-secret-value"}, want: present + ": the server refused the request signature: wrong secret access key? (SignatureDoesNotMatch)", access: true},
		{name: "wrong secret write", loc: "s3://" + bucket + "/new", create: true, env: map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-secret-value"}, want: "SignatureDoesNotMatch", access: true},
		{name: "unknown key id", loc: present, env: map[string]string{"AWS_ACCESS_KEY_ID": "nobody"}, want: "the access key id is not known to the server", access: true},
		{name: "no credentials", loc: present, env: map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, want: present + ": no usable AWS credentials", access: true},
		{name: "endpoint refused", loc: present, env: map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, want: present + ": opening: cannot reach the S3 endpoint", access: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			b, err := Parse(c.loc, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if c.create {
				err = upload(t, b, []byte("x"), store.CreateOptions{})
			} else {
				var src store.Source
				src, err = b.Open(context.Background())
				if err == nil {
					src.Close()
				}
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
			var ae *store.AccessError
			if errors.As(err, &ae) != c.access || errors.Is(err, store.ErrNotFound) != c.notFound {
				t.Errorf("%v: access error %v (want %v), not found %v (want %v)", err, errors.As(err, &ae), c.access, errors.Is(err, store.ErrNotFound), c.notFound)
			}
			if s := err.Error(); strings.Contains(s, remotetest.SecretKey) || strings.Contains(s, "wrong-secret-value") || strings.Contains(s, "\n") {
				t.Errorf("error holds a secret or a newline: %q", s)
			}
			if d := time.Since(start); d > 20*time.Second && !c.access {
				t.Errorf("a permanent error took %v", d)
			}
		})
	}
	if up := srv.OpenUploads(t, bucket); len(up) != 0 {
		t.Errorf("open uploads left: %v", up)
	}
}

// TestS3Transient: throttling (503 SlowDown), 500 and connections cut mid
// response are retried per part and per range; the object is exact.
func TestS3Transient(t *testing.T) {
	srv := remotetest.StartS3(t)
	proxy := remotetest.NewProxy(t, srv.Endpoint)
	srv.SetEnv(t, proxy.URL)
	bucket := srv.Bucket(t)
	b, _ := Parse("s3://"+bucket+"/flaky", testConfig())
	data := randomBytes(11 << 20)

	// Every other request is throttled or fails on its first attempt
	// (in turn: the first request throttled, the third failed, ...) and
	// passes on its retry. Faults on every attempt alike (a third of all
	// requests) sometimes failed one request five times in a row, past
	// the retryer's MaxAttempts: a flaky test, not a client that gave up
	// early.
	var mu sync.Mutex
	tries := map[string]int{}
	firsts := 0
	proxy.SetFaults(func(r *http.Request, _ int) remotetest.Fault {
		mu.Lock()
		defer mu.Unlock()
		key := r.Method + " " + r.URL.String() + " " + r.Header.Get("Range")
		if tries[key]++; tries[key] > 1 {
			return remotetest.Pass
		}
		firsts++
		switch firsts % 4 {
		case 1:
			return remotetest.SlowDown
		case 3:
			return remotetest.InternalError
		}
		return remotetest.Pass
	})
	if err := upload(t, b, data, store.CreateOptions{}); err != nil {
		t.Fatalf("upload through throttling: %v", err)
	}
	if proxy.Injected(remotetest.SlowDown) == 0 || proxy.Injected(remotetest.InternalError) == 0 {
		t.Fatal("no fault was injected during the upload")
	}
	readBack(t, b, data)

	proxy.SetFaults(func(r *http.Request, n int) remotetest.Fault {
		if r.Method == http.MethodGet && r.Header.Get("Range") != "bytes=0-0" && n%2 == 0 {
			return remotetest.CutBody
		}
		return remotetest.Pass
	})
	readBack(t, b, data)
	if proxy.Injected(remotetest.CutBody) == 0 {
		t.Fatal("no response was cut")
	}
}

// TestS3Interrupted: a cancelled dump and a server killed mid-upload
// leave no object and no open multipart upload.
func TestS3Interrupted(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	bucket := srv.Bucket(t)
	b, _ := Parse("s3://"+bucket+"/cut", testConfig())
	chunk := randomBytes(1 << 20)

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		sink, err := b.Create(ctx, store.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 12; i++ {
			if _, err := sink.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := sink.Commit(ctx); err == nil {
			t.Fatal("commit after cancel succeeded")
		}
		sink.Abort()
	})
	if keys, up := srv.Objects(t, bucket), srv.OpenUploads(t, bucket); len(keys)+len(up) != 0 {
		t.Fatalf("after cancel: objects %v, uploads %v", keys, up)
	}

	t.Run("server killed", func(t *testing.T) {
		sink, err := b.Create(context.Background(), store.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 11; i++ {
			if _, err := sink.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		srv.Kill()
		var werr error
		for i := 0; i < 40 && werr == nil; i++ {
			_, werr = sink.Write(chunk)
		}
		if werr == nil {
			werr = sink.Commit(context.Background())
		}
		if werr == nil || !strings.Contains(werr.Error(), "s3://"+bucket+"/cut") {
			t.Fatalf("upload to a dead server: %v", werr)
		}
		// The server comes back while Abort retries.
		back := make(chan struct{})
		go func() { time.Sleep(time.Second); srv.Start(); close(back) }()
		sink.Abort()
		<-back
	})
	if keys, up := srv.Objects(t, bucket), srv.OpenUploads(t, bucket); len(keys)+len(up) != 0 {
		t.Fatalf("after a kill: objects %v, uploads %v", keys, up)
	}
}

// TestS3Changed: an object replaced while it is read fails the read.
func TestS3Changed(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	bucket := srv.Bucket(t)
	b, _ := Parse("s3://"+bucket+"/x", testConfig())
	if err := upload(t, b, randomBytes(5000), store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := upload(t, b, bytes.Repeat([]byte("y"), 5000), store.CreateOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	r, _, _ := src.Random()
	if _, err := r.ReadAt(make([]byte, 10), 100); err == nil || !strings.Contains(err.Error(), "changed while it was being read") {
		t.Fatalf("read of a replaced object: %v", err)
	}
	_ = io.EOF
}

func TestPartSize(t *testing.T) {
	for _, hint := range []int64{0, 1 << 20, 10 << 30, 1 << 40, 5 << 40} {
		base := partSize(0, hint)
		var total int64
		for n := int32(1); n <= maxParts; n++ {
			total += sizeOfPart(base, n)
		}
		if base < minPartSize || base > maxPartSize || total < 2*hint {
			t.Errorf("hint %d: part size %d, 10,000 parts hold %d", hint, base, total)
		}
	}
	if got := partSize(1, 0); got != minPartSize {
		t.Errorf("a configured 1 byte part is %d, want S3's minimum", got)
	}
}

// TestS3StaleUploads: the uploads a killed dump left open on a key (here
// sinks dropped without Commit or Abort, as SIGKILL drops them) are
// aborted by the next dump to that key, each named in one warning; an
// upload to a longer key with the same prefix is left alone.
func TestS3StaleUploads(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	bucket := srv.Bucket(t)
	ctx := context.Background()
	var warnings []string
	cfg := testConfig()
	cfg.Warn = func(msg string) { warnings = append(warnings, msg) }
	b, _ := Parse("s3://"+bucket+"/nightly.pgs", cfg)
	other, _ := Parse("s3://"+bucket+"/nightly.pgs.old", cfg)
	chunk := randomBytes(6 << 20) // one part uploaded
	var stale []string
	for _, be := range []*Backend{b, b, other} {
		sk, err := be.Create(ctx, store.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sk.Write(chunk); err != nil {
			t.Fatal(err)
		}
		// A killed process's uploads end with it: none in flight.
		sk.(*sink).wg.Wait()
		stale = append(stale, sk.(*sink).uploadID)
	}
	// The second Create already aborted the first one's upload.
	if len(warnings) != 1 || !strings.Contains(warnings[0], stale[0]) {
		t.Fatalf("warnings %q, want one naming %s", warnings, stale[0])
	}
	warnings = nil
	data := randomBytes(3 << 20)
	if err := upload(t, b, data, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readBack(t, b, data)
	want := "s3://" + bucket + "/nightly.pgs: aborted a stale multipart upload left by a killed run (upload " + stale[1] + ", begun "
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Fatalf("warnings %q, want one starting %q", warnings, want)
	}
	if up := srv.OpenUploads(t, bucket); len(up) != 1 || up[0] != "nightly.pgs.old "+stale[2] {
		t.Fatalf("open uploads %v, want only nightly.pgs.old's", up)
	}
}

// TestS3CutMessage: an endpoint that hangs up ends in a message saying
// so, not Go's bare "EOF" or "unexpected EOF": a response cut off after
// some of its bytes, or a connection closed before any answer.
func TestS3CutMessage(t *testing.T) {
	srv := remotetest.StartS3(t)
	proxy := remotetest.NewProxy(t, srv.Endpoint)
	srv.SetEnv(t, proxy.URL)
	bucket := srv.Bucket(t)
	cfg := testConfig()
	cfg.Read = remote.Options{Window: 64 << 10, Backoff: time.Millisecond, Attempts: 1} // one try: a retry asks for the rest, which the proxy cuts before its headers
	b, _ := Parse("s3://"+bucket+"/cut-message", cfg)
	if err := upload(t, b, randomBytes(256<<10), store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, _, _ := src.Random()
	proxy.SetFaults(func(r *http.Request, n int) remotetest.Fault {
		if r.Method == http.MethodGet {
			return remotetest.CutBody
		}
		return remotetest.Pass
	})
	_, err = r.ReadAt(make([]byte, 48<<10), 1000)
	t.Logf("%v", err)
	if err == nil || !strings.Contains(err.Error(), ": reading 49152 bytes at offset 1000: the S3 endpoint's response was cut off after ") || strings.Contains(err.Error(), "EOF") {
		t.Errorf("error %v, want one saying the response was cut off, without \"EOF\"", err)
	}
	_, err = r.ReadAt(make([]byte, 2048), 1000) // the proxy hangs up before its headers
	t.Logf("%v", err)
	if err == nil || !strings.Contains(err.Error(), ": reading 2048 bytes at offset 1000: connection to the S3 endpoint lost: it closed the connection without answering") || strings.Contains(err.Error(), "EOF") {
		t.Errorf("error %v, want one saying the endpoint closed the connection, without \"EOF\"", err)
	}
}
