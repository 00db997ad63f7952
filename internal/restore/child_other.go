//go:build !linux

package restore

import "os/exec"

// dieWithParent has no portable equivalent outside Linux: a killed pgsprint
// may leave its pg_restore running, and a resume waits for its session.
func dieWithParent(cmd *exec.Cmd) {}
