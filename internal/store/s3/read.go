package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remote"
)

// source is an opened object: its size and ETag, read with ranged GETs
// that each carry If-Match, so an object replaced under a restore fails
// it instead of mixing two archives.
type source struct {
	*remote.Reader
	cancel context.CancelFunc
}

// Open implements store.Backend. It reads the object's first byte to learn
// its size and ETag; a missing object is store.ErrNotFound.
func (b *Backend) Open(ctx context.Context) (store.Source, error) {
	cl, err := b.client(ctx)
	if err != nil {
		return nil, err
	}
	size, etag, err := b.probe(ctx, cl)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	fetch := func(ctx context.Context, off int64, p []byte) (int, error) {
		rng := "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(p))-1, 10)
		out, err := cl.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.bucket, Key: &b.key, Range: &rng, IfMatch: etag})
		if err != nil {
			if apiCode(err) == "PreconditionFailed" {
				return 0, fmt.Errorf("%s: the object changed while it was being read", b)
			}
			return 0, b.explain(fmt.Sprintf("reading %d bytes at offset %d", len(p), off), err)
		}
		defer out.Body.Close()
		n, err := io.ReadFull(out.Body, p)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = fmt.Errorf("the S3 endpoint's response was cut off after %d bytes", n) // not Go's "unexpected EOF"
			}
			return n, bodyError{fmt.Errorf("%s: reading %d bytes at offset %d: %w", b, len(p), off, err)}
		}
		return n, nil
	}
	return &source{Reader: remote.NewReader(rctx, size, fetch, isBodyError, b.cfg.Read), cancel: cancel}, nil
}

// probe reads the object's first byte for its size and ETag. A GET rather
// than a HEAD: a HEAD's error has no body, so a wrong secret and a
// missing permission would both be a bare 403.
func (b *Backend) probe(ctx context.Context, cl *awss3.Client) (size int64, etag *string, err error) {
	out, err := cl.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.bucket, Key: &b.key, Range: aws.String("bytes=0-0")})
	switch {
	case err == nil:
		out.Body.Close()
		size, err = totalFromContentRange(aws.ToString(out.ContentRange), aws.ToInt64(out.ContentLength))
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", b, err)
		}
		return size, out.ETag, nil
	case apiCode(err) == "InvalidRange":
		return 0, nil, nil // an empty object: the archive reader says it is too short
	}
	return 0, nil, b.explain("opening", err)
}

// Random implements store.Source.
func (s *source) Random() (io.ReaderAt, int64, bool) { return s.Reader, s.Size(), true }

// Sequential implements store.Source; Random is always available.
func (s *source) Sequential() io.Reader { return io.NewSectionReader(s.Reader, 0, s.Size()) }

// Close implements store.Source: requests still in flight are cancelled.
func (s *source) Close() error {
	s.cancel()
	return nil
}

// bodyError is a response body cut short (a connection reset mid-range):
// the SDK has already answered, so the retry is the reader's.
type bodyError struct{ err error }

func (e bodyError) Error() string { return e.err.Error() }
func (e bodyError) Unwrap() error { return e.err }

func isBodyError(err error) bool {
	var be bodyError
	return errors.As(err, &be)
}

// apiCode is S3's error code, or "" when err is not an S3 answer.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// totalFromContentRange reads the object size from "bytes 0-0/1234".
func totalFromContentRange(cr string, length int64) (int64, error) {
	_, total, ok := strings.Cut(cr, "/")
	if !ok || total == "*" {
		if cr == "" {
			return length, nil // a server that ignored the range sent it all
		}
		return 0, fmt.Errorf("unexpected Content-Range %q", cr)
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("unexpected Content-Range %q", cr)
	}
	return n, nil
}
