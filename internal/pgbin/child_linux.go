package pgbin

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the kernel kill cmd when pgsprint dies, even by
// SIGKILL, which no handler can catch.
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
