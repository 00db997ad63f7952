package restore

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd when pgsprint dies, even by
// SIGKILL, which no handler can catch.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
