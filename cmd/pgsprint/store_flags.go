package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/pgsprint/pgsprint/internal/store/location"
	"github.com/pgsprint/pgsprint/internal/store/s3"
)

// storeFlags say how to reach archives in object storage (s3://bucket/key)
// beyond what the standard AWS chain says; credentials never come from a
// flag.
type storeFlags struct {
	endpoint  string
	pathStyle bool
	partSize  sizeFlag
	uploads   int
	overwrite bool
}

// register adds the flags of a command that reads archives, and with
// write those of dump too.
func (s *storeFlags) register(fs *pflag.FlagSet, write bool) {
	fs.StringVar(&s.endpoint, "s3-endpoint", "", "S3-compatible endpoint URL for s3:// archives (MinIO, Ceph, R2, ...; default AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's endpoint_url, else AWS); an IP address or localhost is addressed path-style")
	fs.BoolVar(&s.pathStyle, "s3-path-style", false, "address s3:// buckets in the URL path (http://host/bucket/key) rather than the host name")
	if !write {
		return
	}
	fs.BoolVar(&s.overwrite, "overwrite", false, "replace an existing s3:// object (without it an existing object is refused; a local -f file is always replaced, as by pg_dump)")
	fs.Var(&s.partSize, "s3-part-size", "part size of an s3:// multipart upload (default: from the planned archive size, at least 8MB, so that 10,000 parts are never reached)")
	fs.IntVar(&s.uploads, "s3-uploads", 4, "s3:// parts uploaded at once; memory held for the upload is part size × (this + 1)")
}

// check refuses values no upload can use.
func (s *storeFlags) check() error {
	if s.uploads < 1 || s.uploads > 64 {
		return usageError{fmt.Errorf("--s3-uploads %d: want 1 to 64", s.uploads)}
	}
	if s.partSize != 0 && (s.partSize < 5<<20 || s.partSize > 5<<30) {
		return usageError{fmt.Errorf("--s3-part-size %s: S3 takes parts of 5MB to 5GB", s.partSize.String())}
	}
	return nil
}

// options are the location options for these flags; warn reports what a
// failed upload could not clean up.
func (s *storeFlags) options(in io.Reader, out io.Writer, log *slog.Logger) location.Options {
	return location.Options{In: in, Out: out, S3: s3.Config{
		Endpoint:  s.endpoint,
		PathStyle: s.pathStyle,
		PartSize:  int64(s.partSize),
		Uploads:   s.uploads,
		Warn: func(msg string) {
			if log != nil {
				log.Warn(msg)
			}
		},
	}}
}
