package gctune

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct {
		live, headroom int64
		want           int
	}{
		{10 << 20, 64 << 20, 640},   // a small heap grows by the headroom
		{64 << 20, 64 << 20, 100},   // as large as the headroom: Go's default
		{4 << 30, 64 << 20, 100},    // a large heap: never below the default
		{0, 64 << 20, 1600},         // nothing live yet: the minimum heap is the headroom
		{1 << 20, 64 << 20, 1600},   // a tiny heap: likewise
		{1 << 20, 1 << 20 / 2, 100}, // a headroom below the live heap
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// After a cycle the hook sets GOGC from that cycle's live heap; Start(0)
// sets Go's default back.
func TestStartFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // the operator's GOGC, if the test runner has one, would turn the policy off
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	set := make(chan int, 16)
	mu.Lock()
	tuned = func(p int) {
		select {
		case set <- p:
		default:
		}
	}
	mu.Unlock()
	defer func() { mu.Lock(); tuned = nil; mu.Unlock() }()
	Start(64 << 20)
	var got int
	for done := false; !done; {
		runtime.GC() // a cycle finds the hook's object unreachable and queues its finalizer
		select {
		case got = <-set:
			done = true
		default:
			runtime.Gosched() // let the finalizer goroutine run; the loop ends when it has
		}
	}
	if got < 100 {
		t.Fatalf("the hook set GOGC %d, below Go's default", got)
	}
	if now := debug.SetGCPercent(100); now < 100 {
		t.Fatalf("GOGC %d in force", now)
	}
	Start(0)
	if now := debug.SetGCPercent(100); now != 100 {
		t.Fatalf("GOGC %d after Start(0), want 100", now)
	}
}

// TestLimit: the budget becomes the process's memory limit, none when it
// is 0, and an operator's GOMEMLIMIT is left alone.
func TestLimit(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: the limit is the operator's")
	}
	was := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(was)
	Limit(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Fatalf("memory limit %d after Limit(64 MiB)", got)
	}
	Limit(0)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d after Limit(0), want none", got)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	Limit(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit %d after Limit with GOMEMLIMIT set, want it untouched", got)
	}
}
