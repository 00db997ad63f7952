package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remote"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
)

// testConfig uses the smallest parts S3 allows and short backoffs, so
// that a few MiB make several parts in flight.
func testConfig() Config {
	return Config{PartSize: minPartSize, Uploads: 2, Read: remote.Options{Window: 1 << 20, Backoff: 10 * time.Millisecond}}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 7))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// upload writes data to b in uneven writes and commits it.
func upload(t *testing.T, b *Backend, data []byte, opts store.CreateOptions) error {
	t.Helper()
	ctx := context.Background()
	sink, err := b.Create(ctx, opts)
	if err != nil {
		return err
	}
	defer sink.Abort()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 1+len(rest)%700_001)
		if _, err := sink.Write(rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return sink.Commit(ctx)
}

// readBack checks every way of reading the object against data.
func readBack(t *testing.T, b *Backend, data []byte) {
	t.Helper()
	src, err := b.Open(context.Background())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer src.Close()
	r, size, ok := src.Random()
	if !ok || size != int64(len(data)) {
		t.Fatalf("Random: ok %v size %d, want %d", ok, size, len(data))
	}
	off := len(data) / 3
	got := make([]byte, min(1000, len(data)-off))
	if n, err := r.ReadAt(got, int64(off)); err != nil || !bytes.Equal(got, data[off:off+len(got)]) {
		t.Fatalf("ReadAt: %v or different bytes (n %d)", err, n)
	}
	if n, err := r.ReadAt(make([]byte, 10), size-4); n != 4 || err != io.EOF {
		t.Fatalf("ReadAt past the end: %d, %v; want 4, EOF", n, err)
	}
	// Frames of one stream among others': every third 100 KiB, some
	// adjacent, read through the read-ahead.
	var ranges []store.Range
	var want []byte
	for off := int64(0); off+100<<10 <= int64(len(data)); off += 300 << 10 {
		ranges = append(ranges, store.Range{Off: off, Len: 100 << 10}, store.Range{Off: off + 100<<10, Len: 7})
		want = append(want, data[off:off+100<<10+7]...)
	}
	rr := r.(store.RangeReader).ReadRanges(ranges)
	all, err := io.ReadAll(rr)
	rr.Close()
	if err != nil || !bytes.Equal(all, want) {
		t.Fatalf("ReadRanges: %v, %d bytes, want %d equal", err, len(all), len(want))
	}
}

func TestS3RoundTrip(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	bucket := srv.Bucket(t)
	b, err := Parse("s3://"+bucket+"/dir/a.pgsprint", testConfig())
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(12<<20 + 333)

	sink, err := b.Create(context.Background(), store.CreateOptions{SizeHint: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write(data); err != nil {
		t.Fatal(err)
	}
	if keys := srv.Objects(t, bucket); len(keys) != 0 {
		t.Fatalf("before Commit the bucket holds %v", keys)
	}
	if err := sink.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	sink.Abort() // after Commit: nothing
	readBack(t, b, data)
	if up := srv.OpenUploads(t, bucket); len(up) != 0 {
		t.Errorf("open uploads left: %v", up)
	}

	// An existing object is refused unless Overwrite.
	err = upload(t, b, data[:100], store.CreateOptions{})
	if !errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "s3://"+bucket+"/dir/a.pgsprint") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("second create: %v, want ErrExists naming the object and --overwrite", err)
	}
	if err := upload(t, b, data[:100], store.CreateOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	readBack(t, b, data[:100])
}

// TestExplainNetwork: an endpoint that cannot be dialled (or resolved)
// is an access error (exit 3); a connection reached and then lost in the
// middle of a request (the server killed mid-upload) is a failure of the
// run (exit 1), named as such.
func TestExplainNetwork(t *testing.T) {
	b := &Backend{bucket: "bk", key: "a.pgs"}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name   string
		err    error
		access bool
		want   string
	}{
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true, "s3://bk/a.pgs: uploading part 2: cannot reach the S3 endpoint: connection refused"},
		{"unknown host", &net.DNSError{Err: "no such host", Name: "nowhere.invalid"}, true, "cannot reach the S3 endpoint"},
		{"reset mid-request", fmt.Errorf("operation error S3: UploadPart: %w", reset), false, "s3://bk/a.pgs: uploading part 2: connection to the S3 endpoint lost: connection reset by peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := b.explain("uploading part 2", tc.err)
			var ae *store.AccessError
			if errors.As(err, &ae) != tc.access {
				t.Errorf("access error: %v, want %v (%v)", !tc.access, tc.access, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
