package ops

import "sync"

// history is a ring of the last snapshots of this process's brokers, so
// a dashboard opened now shows the last minutes, not an empty chart.
type history struct {
	mu   sync.Mutex
	ring []Snapshot
	next int // where the next snapshot goes
	full bool
}

func newHistory(n int) *history { return &history{ring: make([]Snapshot, n)} }

func (h *history) add(s Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring[h.next] = s
	h.next = (h.next + 1) % len(h.ring)
	h.full = h.full || h.next == 0
}

// all returns the snapshots, oldest first.
func (h *history) all() []Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.full {
		return append([]Snapshot{}, h.ring[:h.next]...)
	}
	return append(append([]Snapshot{}, h.ring[h.next:]...), h.ring[:h.next]...)
}
