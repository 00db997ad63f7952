// Package s3 keeps archives in an S3 bucket (AWS, MinIO, Ceph RGW, R2, GCS
// interop, any S3-compatible store): s3://bucket/key. A dump uploads with
// a multipart upload, several parts in flight, completed only in Commit
// and aborted on any failure, so the object appears only whole. A
// restore, list or verify reads with ranged GETs, each stream's frames
// fetched ahead and coalesced (remote.Reader).
//
// Credentials, region and endpoint come from the standard AWS chain
// (environment, shared config and credentials files, AWS_PROFILE, web
// identity, container and instance roles), through aws-sdk-go-v2.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/remote"
)

// Config is what the command line says about S3, beside the location.
type Config struct {
	// Endpoint replaces the AWS endpoint (--s3-endpoint); empty means
	// AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url,
	// or AWS itself.
	Endpoint string
	// PathStyle addresses the bucket in the path rather than the host
	// name. An endpoint that is an IP address or localhost always does.
	PathStyle bool
	// PartSize is the multipart upload's part size in bytes; 0 chooses
	// it from the planned archive size (see partSize).
	PartSize int64
	// Uploads is how many parts are in flight at once (default 4). The
	// upload holds at most PartSize × (Uploads + 1) bytes.
	Uploads int
	// Read sizes the read-ahead and the retries of ranged reads.
	Read remote.Options
	// Warn reports what a failed clean-up left behind (an upload that
	// could not be aborted); nil is silent.
	Warn func(msg string)
}

// Backend is one s3://bucket/key location.
type Backend struct {
	bucket, key string
	cfg         Config
}

// Parse reads s3://bucket/key. The key may hold slashes; it may not be
// empty or end in one (that is a folder, not an archive).
func Parse(loc string, cfg Config) (*Backend, error) {
	if len(loc) < 5 || !strings.EqualFold(loc[:5], "s3://") {
		return nil, fmt.Errorf("%s: not an s3:// location", loc)
	}
	rest := loc[5:]
	bucket, key, _ := strings.Cut(rest, "/")
	switch {
	case bucket == "":
		return nil, fmt.Errorf("%s: no bucket (expected s3://bucket/key)", loc)
	case key == "" || strings.HasSuffix(key, "/"):
		return nil, fmt.Errorf("%s: no object key (expected s3://bucket/key, not a folder)", loc)
	}
	if cfg.Uploads <= 0 {
		cfg.Uploads = 4
	}
	return &Backend{bucket: bucket, key: key, cfg: cfg}, nil
}

// String implements store.Backend.
func (b *Backend) String() string { return "s3://" + b.bucket + "/" + b.key }

// client builds an S3 client from the standard chain. Credentials are
// resolved lazily, at the first request, which is where their errors
// surface (as *store.AccessError).
func (b *Backend) client(ctx context.Context) (*awss3.Client, error) {
	opts := []func(*config.LoadOptions) error{
		// The SDK's own log lines ("WARN falling back to IMDSv1" while it
		// looks for credentials) would come before pgsprint's one-line
		// error, and name a step rather than the cause: the error that
		// ends the run says what is missing.
		config.WithLogger(logging.Nop{}),
		// A restore keeps up to 4 ranges in flight per connection: keep
		// their connections open between requests.
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = 128
		})),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 5
				o.MaxBackoff = 10 * time.Second
				o.Backoff = backoff(b.cfg.Read.Backoff)
				o.RateLimiter = ratelimit.None // a long dump must not run out of retry tokens
			})
		}),
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &store.AccessError{Err: fmt.Errorf("%s: reading the AWS configuration: %w", b, err)}
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	endpoint := b.cfg.Endpoint
	if endpoint == "" {
		endpoint = firstNonEmpty(os.Getenv("AWS_ENDPOINT_URL_S3"), aws.ToString(awsCfg.BaseEndpoint))
	}
	custom := endpoint != ""
	if custom {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, &store.AccessError{Err: fmt.Errorf("%s: endpoint %q is not an http:// or https:// URL", b, endpoint)}
		}
	}
	pathStyle := b.cfg.PathStyle || (custom && localOrIP(endpoint))
	return awss3.NewFromConfig(awsCfg, func(o *awss3.Options) {
		if b.cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(b.cfg.Endpoint)
		}
		o.UsePathStyle = pathStyle
		if custom && os.Getenv("AWS_REQUEST_CHECKSUM_CALCULATION") == "" {
			// S3-compatible stores differ in which flexible checksums
			// they accept; the archive checks its own CRCs on every read.
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	}), nil
}

// backoff waits first (default 500 ms) before the first retry, doubling
// up to 10 s, each wait drawn between half and all of it.
func backoff(first time.Duration) retry.BackoffDelayerFunc {
	if first <= 0 {
		first = 500 * time.Millisecond
	}
	return func(attempt int, _ error) (time.Duration, error) {
		d := min(first<<min(attempt-1, 20), 10*time.Second)
		return d/2 + rand.N(d/2+1), nil
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// localOrIP reports whether an endpoint URL names localhost or an IP
// address, where virtual-host addressing (bucket.host) cannot work.
func localOrIP(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || net.ParseIP(h) != nil
}

// explain turns an SDK error into one line naming the bucket and key:
// a missing object is store.ErrNotFound, refused credentials and an
// endpoint that cannot be dialled are *store.AccessError (exit 3); a
// connection lost mid-request and the rest say what happened (exit 1).
func (b *Backend) explain(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		switch code {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s: %w", b, store.ErrNotFound)
		case "NoSuchBucket":
			return fmt.Errorf("%s: bucket %q does not exist", b, b.bucket)
		case "InvalidAccessKeyId", "XAdminUserNotFound": // the second is versitygw's
			return &store.AccessError{Err: fmt.Errorf("%s: the access key id is not known to the server (InvalidAccessKeyId)", b)}
		case "SignatureDoesNotMatch":
			return &store.AccessError{Err: fmt.Errorf("%s: the server refused the request signature: wrong secret access key? (SignatureDoesNotMatch)", b)}
		case "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "AuthorizationHeaderMalformed":
			return &store.AccessError{Err: fmt.Errorf("%s: the server refused the credentials (%s)", b, code)}
		case "AccessDenied", "Forbidden":
			return fmt.Errorf("%s: %s: access denied (%s)", b, op, code)
		}
		msg := ae.ErrorMessage()
		if msg == "" {
			return fmt.Errorf("%s: %s: %s", b, op, code)
		}
		return fmt.Errorf("%s: %s: %s: %s", b, op, code, msg)
	}
	if isCredentialsError(err) {
		return &store.AccessError{Err: fmt.Errorf("%s: no usable AWS credentials (environment, shared credentials and config files, AWS_PROFILE, web identity, container or instance role): %s", b, lastLine(err))}
	}
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	switch {
	case errors.As(err, &de), errors.As(err, &oe) && oe.Op == "dial":
		return &store.AccessError{Err: fmt.Errorf("%s: %s: cannot reach the S3 endpoint: %s", b, op, lastLine(err))}
	case errors.As(err, &oe), errors.As(err, &ne):
		// Reached, then lost (a connection reset or cut mid-request):
		// a failure of the run, not a place that cannot be reached.
		why := lastLine(err)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			why = "it closed the connection without answering" // not Go's bare "EOF"
		}
		return fmt.Errorf("%s: %s: connection to the S3 endpoint lost: %s", b, op, why)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Go's bare "EOF" at the end of the SDK's chain: reached, then
		// hung up before its answer.
		return fmt.Errorf("%s: %s: connection to the S3 endpoint lost: it closed the connection without answering", b, op)
	}
	return fmt.Errorf("%s: %s: %w", b, op, err)
}

// isCredentialsError recognises the SDK's failure to find or fetch
// credentials, which has no exported type.
func isCredentialsError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "failed to retrieve credentials") || strings.Contains(s, "failed to refresh cached credentials") ||
		strings.Contains(s, "no EC2 IMDS role found") || strings.Contains(s, "static credentials are empty")
}

// lastLine is the innermost part of an SDK error chain, which names the
// cause without the operation prefixes.
func lastLine(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}
