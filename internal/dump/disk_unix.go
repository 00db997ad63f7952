//go:build unix

package dump

import "golang.org/x/sys/unix"

// writable checks, without writing, that the process may create files in
// dir.
func writable(dir string) error { return unix.Access(dir, unix.W_OK|unix.X_OK) }

// freeBytes is what an unprivileged process may still write on dir's
// file system.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
