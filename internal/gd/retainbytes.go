package gd

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The size bound of a pubend's retention (Config.MaxRetainBytes, the config
// key max_retain_bytes). MaxRetain bounds by age what a durable subscriber
// that is away can hold back; a busy pubend reaches its disk's size long
// before that. Past the size bound the pubend releases its oldest events
// under the same rule as the age bound (Gryphon DS, DSN 2003 §3, the
// PHB-controlled early release): never a tick some downstream SHB has not
// delivered (T_d), and the durable subscriber that needed it gets a gap.

// retainedBytes accounts, at a pubend, for the events logged and not yet
// released (L), oldest first. The oldest are cold in the pubend's
// knowledge (tick.Knowledge.Freeze): their sizes are the weights there, a
// few bytes an event, so that a pubend keeping millions of events for a
// durable subscriber that is away does not pay for each what it pays for
// the newest. The others wait here, 16 bytes each, until they freeze
// (freeze, cache.go).
type retainedBytes struct {
	fifo  []sizedTick
	head  int   // fifo[:head] are released or frozen
	bytes int64 // of fifo[head:]
}

type sizedTick struct {
	t    tick.Tick
	size int64
}

// retainedSize is what an event counts for against the bound: its encoded
// size, near what its log record takes.
func retainedSize(ev *msg.Event) int64 {
	return int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload))
}

// push accounts for an event just made durable (in tick order).
func (r *retainedBytes) push(t tick.Tick, size int64) {
	r.fifo = append(r.fifo, sizedTick{t, size})
	r.bytes += size
}

// release drops the events at or below final.
func (r *retainedBytes) release(final tick.Tick) {
	for r.head < len(r.fifo) && r.fifo[r.head].t <= final {
		r.bytes -= r.fifo[r.head].size
		r.head++
	}
	r.compact()
}

func (r *retainedBytes) compact() {
	if r.head == len(r.fifo) {
		r.fifo, r.head = r.fifo[:0], 0
	} else if r.head > len(r.fifo)/2 {
		r.fifo = append(r.fifo[:0], r.fifo[r.head:]...)
		r.head = 0
	}
	if cap(r.fifo) > 1024 && len(r.fifo) < cap(r.fifo)/4 {
		r.fifo = append(make([]sizedTick, 0, 2*len(r.fifo)), r.fifo...)
	}
}

// take removes the oldest event's entry when it is at t (freezing it) and
// returns its size.
func (r *retainedBytes) take(t tick.Tick) (int64, bool) {
	if r.head == len(r.fifo) || r.fifo[r.head].t != t {
		return 0, false
	}
	sz := r.fifo[r.head].size
	r.bytes -= sz
	r.head++
	return sz, true
}

// retained returns the bytes and the number of a pubend's logged events
// that are not released: the cold ones and the others.
func (ps *pstream) retainedTotal() (bytes int64, events int) {
	cold, _ := ps.in.K.Cold()
	return cold.Sum() + ps.retained.bytes, cold.Len() + len(ps.retained.fifo) - ps.retained.head
}

// overRetained returns the tick up to which the oldest events must be
// released for the rest to fit in limit bytes, looking no further than
// bound (no tick above it may be released): 0 when they fit.
func (e *Engine) overRetained(ps *pstream, limit int64, bound tick.Tick) tick.Tick {
	total, _ := ps.retainedTotal()
	if limit <= 0 || total <= limit {
		return 0
	}
	var t tick.Tick
	left := total
	// The oldest first, cold then not; next is the first event the walk
	// did not release.
	var next tick.Tick
	step := func(x tick.Tick, size int64) bool {
		if left <= limit || x > bound {
			next = x
			return false
		}
		left -= size
		t = x
		return true
	}
	cold, _ := ps.in.K.Cold()
	going := true
	cold.Each(0, func(x tick.Tick, w int64) bool {
		going = step(x, w)
		return going
	})
	r := &ps.retained
	for i := r.head; going && i < len(r.fifo); i++ {
		going = step(r.fifo[i].t, r.fifo[i].size)
	}
	if e.mut&MutReleaseOneMore != 0 && next != 0 && next <= bound {
		t = next // broken on purpose: one event more than the bound needs
	}
	return t
}
