package pg

import "strings"

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
