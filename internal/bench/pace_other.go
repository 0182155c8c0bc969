//go:build !linux

package bench

import "time"

// sleeper paces the fixed-rate publisher; only Linux has a finer one
// (pace_linux.go).
type sleeper struct{}

func newSleeper() *sleeper { return nil }

func (s *sleeper) sleep(d time.Duration) { time.Sleep(d) }

func (s *sleeper) close() {}
