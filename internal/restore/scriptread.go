package restore

import (
	"bytes"
	"errors"
	"io"
	"os/exec"

	"github.com/pgsprint/pgsprint/internal/toc"
)

// readScript runs cmd (pg_restore --verbose --file=-) and parses its
// standard output into entries as it comes (toc.ReadScript): the text of a
// schema with 100,000 tables is tens of MB, more than the entries made of
// it, and it is never held whole. want is as for toc.ParseScript. Like
// exec.Cmd.Output, a failed command's standard error is kept in its
// *exec.ExitError.
func readScript(cmd *exec.Cmd, want []int) (*toc.Script, error) {
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
	script, perr := toc.ReadScript(out, want)
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
	return script, nil
}
