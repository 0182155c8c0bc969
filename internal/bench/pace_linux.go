package bench

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// sleeper paces the fixed-rate publisher. time.Sleep cannot: below a
// millisecond, a Go process with nothing else to run waits in epoll for a
// whole millisecond (the runtime's poller rounds a timer's delay up to
// 1 ms), so a publisher due every 100 µs fell up to a millisecond behind
// its schedule and then caught up in a burst, and that lateness was
// measured as the system's latency (it counts from the intended send
// time). A timerfd read through the runtime's poller wakes at the
// kernel's timer resolution instead, without holding a thread.
type sleeper struct {
	fd  int
	f   *os.File
	buf [8]byte
}

func newSleeper() *sleeper {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil // time.Sleep then
	}
	return &sleeper{fd: fd, f: os.NewFile(uintptr(fd), "bench-pacer")}
}

// sleep waits d (a nil sleeper: time.Sleep).
func (s *sleeper) sleep(d time.Duration) {
	if s != nil && d > 0 {
		if unix.TimerfdSettime(s.fd, 0, &unix.ItimerSpec{Value: unix.NsecToTimespec(d.Nanoseconds())}, nil) == nil {
			if _, err := s.f.Read(s.buf[:]); err == nil {
				return
			}
		}
	}
	time.Sleep(d)
}

func (s *sleeper) close() {
	if s != nil {
		s.f.Close()
	}
}
