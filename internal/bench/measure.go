package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// collector is shared by every subscription of a run: it records latency
// (from the intended send time) and checks exactly-once, in-order delivery
// per (subscription, publisher) — each publisher has its own pubend, so
// publisher order is pubend order.
type collector struct {
	mu        sync.Mutex
	hist      *hdrhistogram.Histogram
	last      map[[2]uint32]uint64 // (subscription, publisher) → last seq
	delivered int64
	dups      int64 // seq not above the last one seen: duplicate or reordered
	gaps      int64 // seq jumped: something missing (so far)
	firstRecv int64
	lastRecv  int64
	// series keeps (intended, latency) samples for the latency-over-time plot.
	keepSeries bool
	series     []sample
	onDelivery func(Delivery) // optional hook (catch-up), called under mu
	more       chan struct{}
}

type sample struct{ at, latNs int64 }

func newCollector(keepSeries bool) *collector {
	return &collector{
		hist: hdrhistogram.New(1, 120_000_000, 3), // 1 µs … 120 s
		last: map[[2]uint32]uint64{}, keepSeries: keepSeries, more: make(chan struct{}, 1),
	}
}

// sink returns the delivery function for subscription number sub, which
// should see every stride-th seq of each publisher (1: all of them).
func (c *collector) sink(sub uint32, stride uint64) func(Delivery) {
	return func(d Delivery) {
		lat := d.Recv - d.Intended
		c.mu.Lock()
		k := [2]uint32{sub, d.Publisher}
		switch last := c.last[k]; {
		case d.Seq <= last:
			c.dups++
		default:
			if last != 0 && d.Seq != last+stride {
				c.gaps++
			}
			c.last[k] = d.Seq
		}
		c.delivered++
		if c.firstRecv == 0 {
			c.firstRecv = d.Recv
		}
		c.lastRecv = d.Recv
		c.hist.RecordValue(max(lat/1000, 1))
		if c.keepSeries {
			c.series = append(c.series, sample{d.Intended, lat})
		}
		if c.onDelivery != nil {
			c.onDelivery(d)
		}
		c.mu.Unlock()
		select {
		case c.more <- struct{}{}:
		default:
		}
	}
}

func (c *collector) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delivered
}

// waitFor waits until n deliveries arrived, the context ends, or nothing
// has arrived for idle (the system has stopped delivering).
func (c *collector) waitFor(ctx context.Context, n int64, idle time.Duration) error {
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		got := c.count()
		if got >= n {
			return nil
		}
		select {
		case <-c.more:
			t.Reset(idle)
		case <-t.C:
			return fmt.Errorf("delivery stalled at %d of %d for %v", got, n, idle)
		case <-ctx.Done():
			return fmt.Errorf("delivery at %d of %d: %w", c.count(), n, ctx.Err())
		}
	}
}

// usage is the process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxRSS is the process's peak resident set since it started (bytes).
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // KiB on Linux
}

// rssSampler tracks the peak resident set during one measured window:
// rusage's maxrss only ever grows over the whole process, so it cannot
// tell one system's run from the previous one's.
type rssSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	peak   int64
}

func startRSS(ctx context.Context) *rssSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &rssSampler{cancel: cancel, done: make(chan struct{}), peak: currentRSS()}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.peak = max(s.peak, currentRSS())
			}
		}
	}()
	return s
}

// stop ends sampling and returns the peak in bytes.
func (s *rssSampler) stop() int64 {
	s.cancel()
	<-s.done
	return max(s.peak, currentRSS())
}

func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// window measures CPU and RSS from start to stop.
type window struct {
	cpu0 time.Duration
	t0   time.Time
	rss  *rssSampler
}

func startWindow(ctx context.Context) *window {
	return &window{cpu0: cpuTime(), t0: time.Now(), rss: startRSS(ctx)}
}

func (w *window) stop() (cpu, wall time.Duration, peakRSS int64) {
	return cpuTime() - w.cpu0, time.Since(w.t0), w.rss.stop()
}

func numCPU() int { return runtime.NumCPU() }
