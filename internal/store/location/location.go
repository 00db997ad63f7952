// Package location turns an archive location as the user gives it (-f,
// or list's and verify's argument) into the store.Backend that reads and
// writes it. It is the one place that knows which media exist.
package location

import (
	"io"
	"os"
	"strings"

	"github.com/pgsprint/pgsprint/internal/store"
	"github.com/pgsprint/pgsprint/internal/store/file"
	"github.com/pgsprint/pgsprint/internal/store/s3"
	"github.com/pgsprint/pgsprint/internal/store/stdio"
	"github.com/pgsprint/pgsprint/internal/store/web"
)

// Options are what a location needs beside its name.
type Options struct {
	// In and Out are what "-" reads and writes: the process's standard
	// input and output (nil fields mean os.Stdin and os.Stdout).
	In  io.Reader
	Out io.Writer
	// S3 is what the command line says about object storage
	// (--s3-endpoint and the upload's part size), for s3:// locations.
	S3 s3.Config
}

// Stdio is Options for callers that name only standard input or output.
type Stdio = Options

// Parse returns the Backend for loc: "-" is standard input and output,
// a listed URL scheme its medium, anything else a file path.
func Parse(loc string, std Stdio) (store.Backend, error) {
	if loc == "-" {
		in, out := std.In, std.Out
		if in == nil {
			in = os.Stdin
		}
		if out == nil {
			out = os.Stdout
		}
		return stdio.New(in, out), nil
	}
	switch scheme(loc) {
	case "s3":
		return s3.Parse(loc, std.S3)
	case "http", "https":
		// The same read-ahead as an S3 object.
		return web.Parse(loc, nil, std.S3.Read)
	}
	return file.New(loc), nil
}

// scheme is the URL scheme of the media a location names with one, in
// lower case, or "". A scheme not listed here leaves loc a file path, as
// it always was.
func scheme(loc string) string {
	s, _, ok := strings.Cut(loc, "://")
	if !ok {
		return ""
	}
	switch s = strings.ToLower(s); s {
	case "s3", "http", "https":
		return s
	}
	return ""
}

// IsURL reports whether loc names a remote medium rather than a file or
// "-": what a command must not treat as a path, and whose name may hold
// a secret (String gives the one to print).
func IsURL(loc string) bool { return scheme(loc) != "" }
