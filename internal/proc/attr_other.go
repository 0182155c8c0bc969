//go:build !linux

package proc

import "syscall"

// sysProcAttr puts a broker in its own process group. Only Linux can also
// tie its life to the harness (attr_linux.go).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
