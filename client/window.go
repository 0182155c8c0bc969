package client

import "sync"

// window bounds a client's unacknowledged publishes (Options.MaxInflight).
// A publisher at the bound waits until acks have freed an eighth of it,
// not a single slot: at saturation a wake-up per freed slot was a
// wake-up per ack, and a publisher woken for a burst also sends it in
// fewer, fuller PublishRun frames. All methods run under the client's mu.
type window struct {
	room     *sync.Cond
	max, low int // the bound, and where a waiting publisher is woken
	inflight int
	waiting  bool
	stopped  bool // the client stopped: nothing more is admitted
}

func newWindow(mu *sync.Mutex, bound int) window {
	return window{room: sync.NewCond(mu), max: bound, low: bound - max(1, bound/8)}
}

// acquire takes a slot, waiting at the bound; false once stopped.
func (w *window) acquire() bool {
	for w.inflight >= w.max && !w.stopped {
		w.waiting = true
		w.room.Wait()
	}
	if w.stopped {
		return false
	}
	w.inflight++
	return true
}

// release frees n slots (their publishes were answered).
func (w *window) release(n int) {
	w.inflight -= n
	if w.waiting && w.inflight <= w.low {
		w.waiting = false
		w.room.Broadcast()
	}
}

// stop admits nothing more and wakes every waiting publisher.
func (w *window) stop() {
	w.stopped = true
	w.room.Broadcast()
}
