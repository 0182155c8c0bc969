package storage

import (
	"errors"
	"syscall"
)

// NoRoom reports whether err, a failed append or fsync, is for want of
// room (a full filesystem, a quota), and says which: then the log is
// reopened once room returns rather than the broker stopped (shell.Reopener).
func NoRoom(err error) (reason string, ok bool) {
	var errno syscall.Errno
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		if errors.As(err, &errno) {
			return errno.Error(), true
		}
		return "no room on the disk", true
	}
	return "", false
}
