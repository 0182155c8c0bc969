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

// MutReleaseOneMore: past the size bound the pubend releases one event
// more than the bound needs. Numbered above the other release mutations.
const MutReleaseOneMore Mutation = 1 << 23

// retainedBytes accounts, at a pubend, for the events logged and not yet
// released (L), oldest first: 16 bytes per event.
type retainedBytes struct {
	fifo  []sizedTick
	head  int   // fifo[:head] are released
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
	if r.head == len(r.fifo) {
		r.fifo, r.head = r.fifo[:0], 0
	} else if r.head > len(r.fifo)/2 {
		r.fifo = append(r.fifo[:0], r.fifo[r.head:]...)
		r.head = 0
	}
}

// over returns the tick up to which the oldest events must be released for
// the rest to fit in limit bytes, looking no further than bound (no tick
// above it may be released): 0 when they fit.
func (r *retainedBytes) over(limit int64, bound tick.Tick, mut Mutation) tick.Tick {
	if limit <= 0 || r.bytes <= limit {
		return 0
	}
	var t tick.Tick
	left := r.bytes
	i := r.head
	for ; i < len(r.fifo) && left > limit && r.fifo[i].t <= bound; i++ {
		left -= r.fifo[i].size
		t = r.fifo[i].t
	}
	if mut&MutReleaseOneMore != 0 && i < len(r.fifo) && r.fifo[i].t <= bound {
		t = r.fifo[i].t // broken on purpose: one event more than the bound needs
	}
	return t
}
