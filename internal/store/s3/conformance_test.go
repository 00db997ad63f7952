package s3

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remotetest"
	"github.com/pgsprint/pgsprint/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	srv := remotetest.StartS3(t)
	srv.SetEnv(t, srv.Endpoint)
	bucket := srv.Bucket(t)
	var n atomic.Int64
	storetest.Run(t, storetest.Medium{
		New: func(t *testing.T) store.Backend {
			b, err := Parse(fmt.Sprintf("s3://%s/conformance/%d.pgs", bucket, n.Add(1)), testConfig())
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Atomic: true, NotFound: true, RefusesExisting: true, Replaces: true,
	})
	if up := srv.OpenUploads(t, bucket); len(up) != 0 {
		t.Errorf("open uploads left: %v", up)
	}
}
