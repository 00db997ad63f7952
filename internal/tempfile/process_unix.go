//go:build unix

package tempfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// alive says whether process pid may still exist: only ESRCH proves that
// it does not (EPERM means it exists under another user).
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// ownedByUs says whether info is of a file this process's user owns.
func ownedByUs(info fs.FileInfo) bool {
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
