package restore

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/pgsprint/pgsprint/internal/archive"
	"github.com/pgsprint/pgsprint/internal/chunk"
	"github.com/pgsprint/pgsprint/internal/codec"
	"github.com/pgsprint/pgsprint/internal/dump"
	"github.com/pgsprint/pgsprint/internal/pgtest"
	"github.com/pgsprint/pgsprint/internal/seal"
	"github.com/pgsprint/pgsprint/internal/store/location"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
	"github.com/pgsprint/pgsprint/internal/store/s3"
)

// TestS3RoundTrip: the torture schema dumped to s3:// (dump.Run, three
// jobs, no multipart upload left open), summarized, checked and restored
// from s3:// through a proxy that throttles and cuts responses, encrypted
// (its structure checked without the key, refused with the wrong one),
// and from an https-style URL served by net/http's file server, with
// schema and row hashes equal each time; an existing object is kept
// without Overwrite. Not parallel: the S3 credentials are the
// environment's, as the binary reads them (cmd/pgsprint's TestS3Faults
// holds the exit codes and messages).
func TestS3RoundTrip(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	ctx := pgtest.Context(t)
	c := pgtest.Shared(t)
	src := c.ConnString(pgtest.TortureDB(t, c, "s3 src"))
	bucket := srv.Bucket(t)
	loc := "s3://" + bucket + "/nightly/torture.pgs"

	dumpFile(t, src, loc, func(o *dump.Options) { o.Jobs = 3 })
	if up := srv.OpenUploads(t, bucket); len(up) != 0 {
		t.Fatalf("open uploads after dump: %v", up)
	}
	err := dumpTo(t, src, loc, nil)
	if err == nil || !strings.Contains(err.Error(), loc+": archive already exists (use --overwrite to replace it)") {
		t.Fatalf("second dump without Overwrite: %v", err)
	}
	dumpFile(t, src, loc, func(o *dump.Options) { o.Jobs, o.Overwrite = 2, true })

	// What list and verify read: the tables, every checksum.
	ar := openAt(t, loc, location.Options{}, nil)
	_, tables, _, err := archive.Summarize(ar.Source)
	if err != nil {
		t.Fatal(err)
	}
	orders := false
	for _, tb := range tables {
		orders = orders || tb.Name == "orders"
	}
	if !orders {
		t.Errorf("the archive's tables lack orders: %v", tables)
	}
	if err := archive.Check(ctx, ar.Source, 2); err != nil {
		t.Errorf("check: %v", err)
	}
	ar.Close()

	t.Run("restore from s3 through faults", func(t *testing.T) {
		proxy := remotetest.NewProxy(t, srv.Endpoint)
		proxy.SetFaults(func(r *http.Request, n int) remotetest.Fault {
			// A few of each, early: every retry costs the SDK's backoff.
			switch {
			case n > 60:
			case n%10 == 0:
				return remotetest.SlowDown
			case n%3 == 0 && r.Header.Get("Range") != "bytes=0-0":
				return remotetest.CutBody
			}
			return remotetest.Pass
		})
		dst := c.ConnString(pgtest.DB(t, c, "s3 dst"))
		// The endpoint given (--s3-endpoint) wins over AWS_ENDPOINT_URL.
		if err := restoreAt(t, loc, location.Options{S3: s3.Config{Endpoint: proxy.URL}}, nil, dst, 3); err != nil {
			t.Fatalf("restore: %v", err)
		}
		if proxy.Injected(remotetest.SlowDown) == 0 || proxy.Injected(remotetest.CutBody) == 0 {
			t.Errorf("faults injected: %d SlowDown, %d cut", proxy.Injected(remotetest.SlowDown), proxy.Injected(remotetest.CutBody))
		}
		pgtest.RequireTorture(t, c, dst)
	})

	t.Run("encrypted through s3", func(t *testing.T) {
		key, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		other, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		sealed := "s3://" + bucket + "/nightly/sealed.pgs"
		dumpFile(t, src, sealed, func(o *dump.Options) { o.Jobs, o.Recipients = 2, []age.Recipient{key.Recipient()} })
		// Without a key, its structure only (verify without --identity).
		b, err := location.Parse(sealed, location.Options{})
		if err != nil {
			t.Fatal(err)
		}
		obj, err := b.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, size, ok := obj.Random()
		if !ok {
			t.Fatal("an s3 object without random access")
		}
		if _, err := archive.CheckStructure(r, size); err != nil {
			t.Errorf("structure of the sealed archive: %v", err)
		}
		obj.Close()
		if _, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Scan}); !errors.Is(err, seal.ErrNoKey) {
			t.Errorf("opened without a key: %v", err)
		}
		dst := c.ConnString(pgtest.DB(t, c, "s3 sealed dst"))
		if err := restoreAt(t, sealed, location.Options{}, []age.Identity{other}, dst, 1); err == nil || !strings.Contains(err.Error(), " is encrypted; no matching identity") {
			t.Fatalf("restore with the wrong key: %v", err)
		}
		if got := pgtest.UserObjects(t, dst); len(got) != 0 {
			t.Fatalf("the refused restore left %v", got)
		}
		if err := restoreAt(t, sealed, location.Options{}, []age.Identity{key}, dst, 2); err != nil {
			t.Fatalf("restore with the key: %v", err)
		}
		pgtest.RequireTorture(t, c, dst)
	})

	t.Run("restore from https", func(t *testing.T) {
		// versitygw keeps objects as plain files: serve the bucket's.
		web := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(srv.Path(bucket, "nightly/torture.pgs")))))
		defer web.Close()
		url := web.URL + "/torture.pgs?X-Amz-Signature=sekrit"
		dst := c.ConnString(pgtest.DB(t, c, "https dst"))
		if err := restoreAt(t, url, location.Options{}, nil, dst, 2); err != nil {
			t.Fatalf("restore: %v", err)
		}
		ar := openAt(t, url, location.Options{}, nil)
		if err := archive.Check(ctx, ar.Source, 2); err != nil {
			t.Errorf("check: %v", err)
		}
		if strings.Contains(ar.String(), "sekrit") {
			t.Errorf("the URL's signature is in its name: %s", ar)
		}
		ar.Close()
		pgtest.RequireTorture(t, c, dst)
		if err := dumpTo(t, src, url, nil); err == nil || !strings.Contains(err.Error(), "cannot write an archive to an http(s) URL") || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("dump to https: %v", err)
		}
	})
}

// openAt opens the archive at loc (any location) with ids.
func openAt(t testing.TB, loc string, lo location.Options, ids []age.Identity) *archive.Opened {
	t.Helper()
	b, err := location.Parse(loc, lo)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := archive.OpenLocation(pgtest.Context(t), b, archive.OpenOptions{Access: archive.Scan, Identities: ids})
	if err != nil {
		t.Fatalf("open %s: %v", loc, err)
	}
	return ar
}

// restoreAt restores the archive at loc, reached with lo and opened with
// ids, into the database at conn with jobs connections, as `pgsprint
// restore -f loc -d conn -j jobs --identity ...` does.
func restoreAt(t testing.TB, loc string, lo location.Options, ids []age.Identity, conn string, jobs int) error {
	t.Helper()
	ctx := pgtest.Context(t)
	b, err := location.Parse(loc, lo)
	if err != nil {
		t.Fatal(err)
	}
	f, err := archive.OpenLocation(ctx, b, archive.OpenOptions{Access: archive.Parallel, SpillDir: t.TempDir(), Identities: ids})
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = Run(ctx, f.Source, Options{Target: pgtest.Config(t, conn), Where: f.String(), Jobs: jobs})
	return err
}

// dumpTo is dumpFile returning dump.Run's error instead of failing.
func dumpTo(t testing.TB, conn, loc string, edit func(*dump.Options)) error {
	t.Helper()
	c, err := codec.Parse("zstd:1")
	if err != nil {
		t.Fatal(err)
	}
	opts := dump.Options{Source: pgtest.Config(t, conn), File: loc, Jobs: 1, Codec: c,
		Split: chunk.Options{ChunkSize: chunk.DefaultSize, Method: chunk.Auto}, Version: "test"}
	if edit != nil {
		edit(&opts)
	}
	_, err = dump.Run(pgtest.Context(t), opts)
	return err
}
