package vfs

import "golang.org/x/sys/unix"

// DropCache implements CacheDropper with posix_fadvise(POSIX_FADV_DONTNEED),
// which drops the range's clean pages from the page cache.
func (o osFile) DropCache(off, n int64) error {
	rc, err := o.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED) }); err != nil {
		return err
	}
	return ferr
}
