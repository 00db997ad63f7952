package archive

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// memFile makes an anonymous file in memory (memfd_create) and the name
// another process of the same user opens it by: /proc/PID/fd/N, which
// opens the memfd anew (its own offset, so pg_restore seeks freely). The
// descriptor is close-on-exec: children open the name, not inherit it.
// It fails where memfd_create is missing or refused (old kernels,
// seccomp) or /proc is not mounted; the caller then uses a file.
func memFile(name string) (*os.File, string, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, "", fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	path := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)
	if _, err := os.Stat(path); err != nil {
		f.Close()
		return nil, "", err
	}
	return f, path, nil
}
