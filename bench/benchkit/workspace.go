package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// WorkDir makes a scratch directory the server's OS user can also reach
// (archives and dumps are written there by tools running as either), and
// builds the pgsprint under test into it.
func WorkDir(ctx context.Context, name string) (dir, pgsprint string, err error) {
	dir, err = os.MkdirTemp("", "pgsprint-bench-"+name+"-*")
	if err != nil {
		return "", "", fmt.Errorf("work directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("work directory: %w", err)
	}
	pgsprint = filepath.Join(dir, "pgsprint")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", pgsprint, "./cmd/pgsprint").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("build pgsprint: %v: %s", err, out)
	}
	return dir, pgsprint, nil
}
