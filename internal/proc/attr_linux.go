package proc

import "syscall"

// sysProcAttr puts a broker in its own process group (a terminal's Ctrl-C
// does not reach it: the harness stops it) and has the kernel kill it when
// the harness dies without stopping it (SIGKILL of `aerie chaos`, a test
// binary's timeout), so no broker outlives its harness holding ports and
// data directories. The signal follows the OS thread that started the
// child; the Go runtime keeps its threads unless a goroutine locked to one
// exits, which this package never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
