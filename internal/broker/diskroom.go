package broker

import "syscall"

// diskRoom returns the bytes an unprivileged writer may still use on the
// filesystem of dir, or -1 when it cannot tell (no directory, an
// in-memory filesystem in tests).
func diskRoom(dir string) int64 {
	if dir == "" {
		return -1
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
