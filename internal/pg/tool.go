package pg

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ToolError reduces a client program's stderr to its most telling line, so
// that a failed pg_dump or pg_restore reaches the user as one line.
func ToolError(stderr []byte, err error) string {
	lines := strings.Split(strings.TrimSpace(string(stderr)), "\n")
	for _, l := range lines {
		if strings.Contains(l, "error:") {
			return strings.TrimSpace(l)
		}
	}
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return err.Error()
}

// ExplainLost turns the bare EOF that a dropped connection produces (the
// server restarted, or the session was terminated) into an error that says
// so; other errors pass through unchanged.
func ExplainLost(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("lost the connection to the server (it restarted or the session was terminated): %w", err)
	}
	return err
}
