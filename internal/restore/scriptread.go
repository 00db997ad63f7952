package restore

import (
	"bytes"
	"errors"
	"io"
	"os/exec"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// eachEntry runs cmd (pg_restore --verbose --file=-) and hands each entry
// of its standard output to fn as it comes (toc.EachEntry): the text of a
// schema with 100,000 tables is tens of MB, and its entries more than the
// plan made of them, so neither is ever held whole. It returns the script's
// preamble. want is as for toc.ParseScript. Like exec.Cmd.Output, a failed
// command's standard error is kept in its *exec.ExitError.
func eachEntry(cmd *exec.Cmd, want []int, fn func(*toc.Entry) error) ([]string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pre, perr := toc.EachEntry(out, want, fn)
	if perr != nil {
		// Read the rest so that the child is not blocked writing.
		_, _ = io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(werr, &exit) && exit.Stderr == nil {
		exit.Stderr = stderr.Bytes()
	}
	switch {
	case werr != nil:
		// A child that failed wrote a partial script: its error is the one.
		return nil, werr
	case perr != nil:
		return nil, perr
	}
	return pre, nil
}
