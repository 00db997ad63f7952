package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/pgsprint/pgsprint/internal/store"
)

// S3's multipart limits.
const (
	maxParts    = 10000
	minPartSize = 5 << 20
	maxPartSize = 5 << 30
	// defaultPartSize is the part size of an archive whose planned size
	// fits 2,000 parts of it (16 GB).
	defaultPartSize = 8 << 20
	// growEvery is how many parts are uploaded at one size before the size
	// doubles, should the archive outgrow its plan.
	growEvery = 2000
)

// partSize is the first part's size: the configured one, or one that
// holds twice the planned size in 2,000 parts (so that an estimate off by
// a lot still leaves room), at least 8 MiB, rounded up to a MiB.
func partSize(configured, sizeHint int64) int64 {
	if configured > 0 {
		return min(max(configured, minPartSize), maxPartSize)
	}
	want := max(int64(defaultPartSize), 2*sizeHint/growEvery)
	want = (want + 1<<20 - 1) &^ (1<<20 - 1)
	return min(want, maxPartSize)
}

// sizeOfPart is part n's size: base for the first growEvery parts, then
// doubling every growEvery parts, so 10,000 parts hold 31 × growEvery ×
// base bytes (496 GB at 8 MiB) whatever the plan said.
func sizeOfPart(base int64, n int32) int64 {
	s := base << ((n - 1) / growEvery)
	return min(s, maxPartSize)
}

// sink is a multipart upload in progress. Write fills one part buffer;
// each full part uploads in its own goroutine while the next fills, at
// most Uploads at once; Write waits for a free buffer, so memory stays
// under part size × (Uploads + 1).
type sink struct {
	b        *Backend
	cl       *awss3.Client
	ctx      context.Context // cancelled by the first failure or Abort
	cancel   context.CancelFunc
	uploadID string
	base     int64

	buf  []byte      // the part being filled
	part int32       // its number
	free chan []byte // buffers back from their upload
	nbuf int         // buffers made so far, at most cap(free)
	wg   sync.WaitGroup

	mu    sync.Mutex
	err   error // first upload failure
	parts []types.CompletedPart
	// unsettled: a part upload ended without the server's answer
	// (cancelled, cut, failed): the server may still be storing it.
	unsettled bool

	committed, aborted bool
}

// Create implements store.Backend: unless opts.Overwrite, an existing
// object is store.ErrExists; then the uploads a killed dump left open on
// the same key are aborted (abortStale), and a multipart upload starts,
// so that missing credentials or bucket fail before the dump begins.
func (b *Backend) Create(ctx context.Context, opts store.CreateOptions) (store.Sink, error) {
	cl, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	if !opts.Overwrite {
		switch _, _, err := b.probe(ctx, cl); {
		case err == nil:
			return nil, fmt.Errorf("%s: %w (use --overwrite to replace it)", b, store.ErrExists)
		case errors.Is(err, store.ErrNotFound):
		default:
			return nil, err
		}
	}
	b.abortStale(ctx, cl)
	out, err := cl.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &b.bucket, Key: &b.key})
	if err != nil {
		return nil, b.explain("starting the upload", err)
	}
	uctx, cancel := context.WithCancel(ctx)
	return &sink{
		b: b, cl: cl, ctx: uctx, cancel: cancel,
		uploadID: aws.ToString(out.UploadId),
		base:     partSize(b.cfg.PartSize, opts.SizeHint),
		part:     1,
		free:     make(chan []byte, b.cfg.Uploads+1),
	}, nil
}

// failure is the first upload error, or nil.
func (s *sink) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Write implements io.Writer.
func (s *sink) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if err := s.failure(); err != nil {
			return written, err
		}
		if s.committed || s.aborted {
			return written, fmt.Errorf("%s: write after the upload ended", s.b)
		}
		if s.buf == nil {
			if err := s.takeBuffer(); err != nil {
				return written, err
			}
		}
		size := int(sizeOfPart(s.base, s.part))
		n := copy(s.buf[len(s.buf):size], p)
		s.buf = s.buf[:len(s.buf)+n]
		p, written = p[n:], written+n
		if len(s.buf) == size {
			if err := s.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

// takeBuffer waits for one of the Uploads+1 buffers, growing it to the
// current part size.
func (s *sink) takeBuffer() error {
	size := int(sizeOfPart(s.base, s.part))
	if len(s.free) == 0 && s.nbuf < cap(s.free) {
		s.buf = make([]byte, 0, size)
		s.nbuf++
		return nil
	}
	select {
	case b := <-s.free:
		if cap(b) < size {
			b = make([]byte, 0, size)
		}
		s.buf = b[:0]
		return nil
	case <-s.ctx.Done():
		if err := s.failure(); err != nil {
			return err
		}
		return s.ctx.Err()
	}
}

// flush uploads the filled buffer as the next part, in the background.
func (s *sink) flush() error {
	if s.part > maxParts {
		return fmt.Errorf("%s: the archive needs more than %d parts: set a larger --s3-part-size", s.b, maxParts)
	}
	buf, n := s.buf, s.part
	s.buf, s.part = nil, s.part+1
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		out, err := s.cl.UploadPart(s.ctx, &awss3.UploadPartInput{
			Bucket: &s.b.bucket, Key: &s.b.key, UploadId: &s.uploadID,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(buf), ContentLength: aws.Int64(int64(len(buf))),
		})
		s.free <- buf
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.unsettled = true
			if s.err == nil {
				s.err = s.b.explain(fmt.Sprintf("uploading part %d", n), err)
				s.cancel()
			}
			return
		}
		s.parts = append(s.parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}()
	return nil
}

// Commit implements store.Sink: the last part, then
// CompleteMultipartUpload, which is when the object appears.
func (s *sink) Commit(ctx context.Context) error {
	if s.committed {
		return nil
	}
	if s.aborted {
		return fmt.Errorf("%s: commit after abort", s.b)
	}
	err := s.failure()
	if err == nil && (s.buf != nil || s.part == 1) {
		if s.buf == nil {
			s.buf = []byte{} // an empty archive is one empty part
		}
		err = s.flush()
	}
	s.wg.Wait()
	if err == nil {
		err = s.failure()
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		sort.Slice(s.parts, func(i, j int) bool { return *s.parts[i].PartNumber < *s.parts[j].PartNumber })
		_, err = s.cl.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
			Bucket: &s.b.bucket, Key: &s.b.key, UploadId: &s.uploadID,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: s.parts},
		})
		err = s.b.explain("completing the upload", err)
	}
	if err != nil {
		s.Abort()
		return err
	}
	s.committed = true
	s.cancel()
	return nil
}

// Abort implements store.Sink: uploads in flight are cancelled and the
// multipart upload is aborted, retried for a while with its own deadline
// (the run's context may be what was cancelled), so that no part is left
// billed and nothing looks like an archive.
//
// A cancelled part upload may still be running on the server, which can
// store the part after the abort and so bring the upload back (S3 says
// an abort may have to be repeated; versitygw recreates the upload's
// directory). So when a part upload ended without an answer, the abort
// is repeated over a few seconds: each answer must be success or
// NoSuchUpload, else the warning says the upload may be left.
//
// Twin of the file sink's Abort in shape (a no-op after Commit or an
// earlier Abort): kept apart because that is store.Sink's contract, and
// what each undoes is its medium's own.
func (s *sink) Abort() {
	if s.committed || s.aborted {
		return
	}
	s.aborted = true
	s.cancel()
	s.wg.Wait()
	s.buf = nil
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := s.abortUpload(ctx)
	if err == nil && s.unsettled {
		// about 4 s in all
		for _, d := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second} {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			if err = s.abortUpload(ctx); err != nil {
				break
			}
		}
	}
	if err != nil && s.b.cfg.Warn != nil {
		s.b.cfg.Warn(fmt.Sprintf("%s: could not abort multipart upload %s (%v); its parts stay stored until it is aborted or a lifecycle rule removes it", s.b, s.uploadID, lastLine(err)))
	}
}

// abortUpload aborts the multipart upload, retrying until ctx ends; an
// upload the server does not know (NoSuchUpload) is aborted already.
func (s *sink) abortUpload(ctx context.Context) error {
	for delay := 500 * time.Millisecond; ; delay = min(2*delay, 8*time.Second) {
		_, err := s.cl.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.b.bucket, Key: &s.b.key, UploadId: &s.uploadID})
		if err == nil || apiCode(err) == "NoSuchUpload" {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}

// abortStale aborts the multipart uploads still open on the backend's
// key: what a dump killed before it could abort its own left (SIGKILL, a
// crash, a lost machine), whose parts S3 keeps, and bills, until they
// are aborted. Each is reported in one line, as a stale temporary file
// is. Uploads to other keys are left alone (a lifecycle rule with
// AbortIncompleteMultipartUpload removes those:
// docs/guide/object-storage-and-encryption.md). A dump to the same key running at this moment loses its
// upload too: two dumps to one key cannot both stand, the later
// completion would replace the earlier. Listing or aborting refused
// (a policy without s3:ListBucketMultipartUploads) is reported and the
// dump goes on.
func (b *Backend) abortStale(ctx context.Context, cl *awss3.Client) {
	warn := func(msg string) {
		if b.cfg.Warn != nil {
			b.cfg.Warn(msg)
		}
	}
	in := &awss3.ListMultipartUploadsInput{Bucket: &b.bucket, Prefix: &b.key}
	for {
		out, err := cl.ListMultipartUploads(ctx, in)
		if err != nil {
			warn(fmt.Sprintf("%s: could not look for multipart uploads a killed run left open (%v)", b, lastLine(err)))
			return
		}
		for _, u := range out.Uploads {
			if aws.ToString(u.Key) != b.key {
				continue // a longer key with ours as its prefix
			}
			id := aws.ToString(u.UploadId)
			_, err := cl.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &b.bucket, Key: &b.key, UploadId: &id})
			switch {
			case err == nil || apiCode(err) == "NoSuchUpload":
				warn(fmt.Sprintf("%s: aborted a stale multipart upload left by a killed run (upload %s, begun %s)", b, id, aws.ToTime(u.Initiated).UTC().Format(time.RFC3339)))
			default:
				warn(fmt.Sprintf("%s: could not abort the stale multipart upload %s (%v); its parts stay stored until it is aborted or a lifecycle rule removes it", b, id, lastLine(err)))
			}
		}
		if !aws.ToBool(out.IsTruncated) || (out.NextKeyMarker == nil && out.NextUploadIdMarker == nil) {
			return
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}
