package faultnet

import (
	"net"
	"sync"
	"time"
)

// A bandwidth limit on what the proxy forwards from the target towards the
// dialing side: a token bucket on the copy loop, so that a link's capacity
// can change while it runs (Gryphon CC §5 E2 alternates a bottleneck's
// bandwidth). Unlike a `bandwidth` in the network config, which the
// upstream broker's paced writer enforces, the queue of a link throttled
// here builds in the socket buffers and in the upstream broker's outbound
// queue, where frames that jump that queue (DCQs) still wait behind
// whatever the kernel holds.

// limitChunk bounds the bytes read per forward while limited, so that a
// throttled copy forwards in small steps rather than a 32 KiB burst.
const limitChunk = 2 << 10

// limitReadBuffer is the receive buffer of the proxy's connection to the
// target while limited: small, so that the kernel does not hide megabytes
// of queue (seconds at tens of KB/s) between the broker and the bucket.
// Not smaller: on loopback (MSS about 64 KiB) 16 KiB, and also the
// kernel's autotuned default, let a 60 KB/s bucket forward only about
// 32 KB/s (window updates wait for half a buffer; TestSetBandwidthPaces).
const limitReadBuffer = 32 << 10

// bucket is a token bucket in bytes; rate 0 means no limit.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // bytes/s
	tokens float64
	last   time.Time
}

// set changes the rate; tokens saved under the old rate are kept up to
// the new burst.
func (b *bucket) set(rate int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(time.Now())
	b.rate = float64(rate)
	b.tokens = min(b.tokens, b.burst())
}

func (b *bucket) limited() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate > 0
}

// burst is 20 ms worth, at least one chunk.
func (b *bucket) burst() float64 { return max(b.rate/50, limitChunk) }

func (b *bucket) refill(now time.Time) {
	if b.rate > 0 && !b.last.IsZero() {
		b.tokens = min(b.tokens+b.rate*now.Sub(b.last).Seconds(), b.burst())
	}
	b.last = now
}

// take waits until n bytes may pass, a chunk at a time: a read made
// before the limit was set may hold more than the burst, which would
// never fit in the bucket at once. The wait is recomputed after each
// sleep, so a rate change applies at once.
func (b *bucket) take(n int) {
	for n > 0 {
		k := min(n, limitChunk)
		b.takeChunk(k)
		n -= k
	}
}

func (b *bucket) takeChunk(n int) {
	for {
		b.mu.Lock()
		now := time.Now()
		b.refill(now)
		if b.rate <= 0 || b.tokens >= float64(n) {
			if b.rate > 0 {
				b.tokens -= float64(n)
			}
			b.mu.Unlock()
			return
		}
		wait := time.Duration((float64(n) - b.tokens) / b.rate * float64(time.Second))
		b.mu.Unlock()
		time.Sleep(min(wait, 50*time.Millisecond))
	}
}

// SetBandwidth limits what the proxy forwards from the target to bytesPerSec
// (0: no limit), on every connection together, from now on. Connections
// made while limited get a small receive buffer towards the target.
func (p *Proxy) SetBandwidth(bytesPerSec int64) {
	p.down.set(bytesPerSec)
}

// shrinkReadBuffer keeps the kernel's share of a limited link's queue
// small (limitReadBuffer).
func shrinkReadBuffer(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(limitReadBuffer)
	}
}
