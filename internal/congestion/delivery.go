package congestion

import (
	"time"

	"github.com/aerie-mq/aerie/internal/tick"
)

// delivery estimates the rate, in events per second, at which a pubend's
// tree takes its events: how fast the pubend's ack prefix (the lowest tick
// every downstream broker acknowledged) moves through the events the
// regulator let in. While a queue lies ahead of the slowest subscriber
// broker, that is the rate of its bottleneck (our addition to Gryphon CC,
// which decreases by fixed factors only; see Regulator.OnUCA).
//
// It keeps the cumulative count of events let in at each position the
// pubend reached, back to the ack prefix: at most historyMax entries, so a
// tree that acknowledges nothing for long costs a bounded amount of memory
// (the oldest entries go, and the estimate then counts a little short).
type delivery struct {
	hist  []countAt // ascending position; the first is at or below the ack prefix
	taken uint64    // events below the ack prefix (a lower bound)
	// marks are (time, taken) at each measurement over the last
	// deliveryWindow and one before it; rate is measured across them.
	marks []takenAt
	rate  float64
}

type takenAt struct {
	at    tick.Time
	taken uint64
}

// deliveryWindow is what the delivery rate is measured over: acks move the
// pubend's ack prefix in steps (every AckInterval, 200 ms, at each hop), so
// a shorter window would often see no step at all and read a stalled tree.
const deliveryWindow = 2 * time.Second

type countAt struct {
	pos   tick.Tick
	count uint64 // events let in up to and including pos
}

const historyMax = 8192

// observe records that count events were let in up to position and that
// the tree acknowledged everything up to acked.
func (d *delivery) observe(position tick.Tick, count uint64, acked tick.Tick) {
	if n := len(d.hist); n == 0 || position > d.hist[n-1].pos {
		if n >= historyMax {
			d.hist = append(d.hist[:0], d.hist[n/2:]...)
		}
		d.hist = append(d.hist, countAt{position, count})
	} else if count > d.hist[n-1].count {
		d.hist[n-1].count = count // more let in at the same tick
	}
	// The last entry at or below acked says how many the tree has taken.
	i := 0
	for i+1 < len(d.hist) && d.hist[i+1].pos <= acked {
		i++
	}
	if d.hist[i].pos <= acked {
		d.taken = max(d.taken, d.hist[i].count)
	}
	if i > 0 {
		d.hist = append(d.hist[:0], d.hist[i:]...)
	}
}

// measure updates the rate at now, over the last deliveryWindow (or what
// there is of it).
func (d *delivery) measure(now tick.Time) {
	d.marks = append(d.marks, takenAt{now, d.taken})
	for len(d.marks) > 2 && now.Sub(d.marks[1].at) >= deliveryWindow {
		d.marks = d.marks[1:]
	}
	if first := d.marks[0]; now > first.at {
		d.rate = float64(d.taken-first.taken) / now.Sub(first.at).Seconds()
	}
}
