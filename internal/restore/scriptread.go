package restore

import (
	"errors"
	"io"
	"os/exec"

	"github.com/pgsprint/pgsprint/internal/pg"
	"github.com/pgsprint/pgsprint/internal/toc"
)

// eachEntry runs cmd (pg_restore --verbose --file=-) and hands each entry
// of its standard output to fn as it comes (toc.EachEntry): the text of a
// schema with 100,000 tables is tens of MB, and its entries more than the
// plan made of them, so neither is ever held whole. It returns the script's
// preamble. want is as for toc.ParseScript.
func eachEntry(cmd *exec.Cmd, want []int, fn func(*toc.Entry) error) ([]string, error) {
	var pre []string
	err := readOutput(cmd, func(r io.Reader) (err error) {
		pre, err = toc.EachEntry(r, want, fn)
		return err
	})
	return pre, err
}

// listIDs runs cmd (pg_restore --list) and reads the dump IDs of its
// listing as it comes (toc.ReadIDs), without holding its text: with
// 100,000 tables, tens of MB while the plan is made.
func listIDs(cmd *exec.Cmd) ([]int, error) {
	var ids []int
	err := readOutput(cmd, func(r io.Reader) (err error) {
		ids, err = toc.ReadIDs(r)
		return err
	})
	return ids, err
}

// readOutput runs cmd with read reading its standard output as it comes.
// Like exec.Cmd.Output, a failed command's standard error is kept in its
// *exec.ExitError, and its error is the one returned: a child that failed
// wrote a partial output.
func readOutput(cmd *exec.Cmd, read func(io.Reader) error) error {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr pg.StderrBuffer
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	rerr := read(out)
	if rerr != nil {
		// Read the rest so that the child is not blocked writing.
		_, _ = io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(werr, &exit) && exit.Stderr == nil {
		exit.Stderr = stderr.Bytes()
	}
	if werr != nil {
		return werr
	}
	return rerr
}
