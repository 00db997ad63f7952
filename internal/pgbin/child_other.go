//go:build !linux

package pgbin

import "os/exec"

// DieWithParent has no portable equivalent outside Linux: a killed pgsprint
// may leave its pg_restore running, and a resume waits for its session.
func DieWithParent(cmd *exec.Cmd) {}
