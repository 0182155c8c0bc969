package broker

import (
	"sync"
	"sync/atomic"
	"time"
)

// Histogram is a snapshot of a distribution with fixed bucket bounds:
// Counts[i] observations were <= Bounds[i] (cumulative, as Prometheus
// wants them), Count in all, summing to Sum.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// histogram records observations from the persister goroutine; Status
// reads a copy from the loop's.
type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.mu.Unlock()
}

func (h *histogram) snapshot() Histogram {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Histogram{Bounds: h.bounds, Counts: make([]uint64, len(h.bounds)), Sum: h.sum}
	for i, c := range h.counts {
		s.Count += c
		if i < len(h.bounds) {
			s.Counts[i] = s.Count
		}
	}
	return s
}

// diskStats are the event log's group commits: how long each fsync took
// (seconds) and how many records each batch held.
type diskStats struct {
	fsync *histogram
	batch *histogram
	// logBytes is the event log's size after the persister's last job:
	// the persister owns the log, the loop reads this for /metrics.
	logBytes atomic.Int64
	// free is the room left on the log's filesystem after the
	// persister's last job (-1: unknown), for the loop (shell.DiskRoom).
	free atomic.Int64
}

func newDiskStats() *diskStats {
	s := &diskStats{
		// 100 µs (a fast SSD) to 1 s (a disk in trouble).
		fsync: newHistogram(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
		// One record (no concurrency) to the thousands a busy PHB batches.
		batch: newHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096),
	}
	s.free.Store(-1)
	return s
}

// commit records one group commit of n records whose fsync took d.
func (s *diskStats) commit(n int, d time.Duration) {
	s.batch.observe(float64(n))
	s.fsync.observe(d.Seconds())
}
