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
	"github.com/pgsprint/pgsprint/internal/store/stdio"
)

// Stdio is what "-" reads and writes: the process's standard input and
// output (nil fields mean os.Stdin and os.Stdout).
type Stdio struct {
	In  io.Reader
	Out io.Writer
}

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
	if scheme, _, ok := strings.Cut(loc, "://"); ok {
		// The media a location names with a URL scheme. A scheme not
		// listed here leaves loc a file path, as it always was.
		switch strings.ToLower(scheme) {
		// case "s3": object storage
		// case "http", "https": a web server
		}
	}
	return file.New(loc), nil
}
