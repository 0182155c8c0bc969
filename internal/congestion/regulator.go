package congestion

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// ErrBadRate reports a UCA whose rates no SHB could have measured (negative
// or NaN). The caller counts it and ignores the message: a broken or hostile
// neighbour must not stall a pubend.
var ErrBadRate = errors.New("congestion: UCA with an impossible rate")

// Regulator is a pubend's side of PDCC (Gryphon CC, Middleware 2003 §3.1).
// It numbers and times the DCQs, decides on every UCA whether to lower the
// publication rate (eq. 2, 3), raises a throttled rate after t_noUCA without
// alerts (eq. 1), and meters publish acks so publishers keep to the rate
// (§4 "PHB Implementation": the pubend stops acknowledging once the target
// rate is reached, which holds publishers back; nothing is dropped).
//
// Before the first alert the rate is unlimited; the first decrease starts
// from the rate publishers were actually acknowledged at.
type Regulator struct {
	cfg Config

	limit float64 // events/s; 0 = unlimited
	rDecr float64 // r_decr: the rate at the last decrease

	seq      uint64    // of the last DCQ sent
	nextDCQ  tick.Time // when the next DCQ is due
	started  bool
	holdSeq  uint64    // no decrease for UCAs below this (first DCQ after the last decrease)
	quietAt  tick.Time // last UCA or increase: t_noUCA counts from here
	prevUCA  msg.UCA   // the last UCA that counted, for "is it improving"
	havePrev bool

	throttled bool // publishers were held back since the last increase

	tokens   float64 // publish acks that may go now
	tokensAt tick.Time

	acked      int // publish acks released since measuredAt
	measuredAt tick.Time
	measured   float64 // acks/s over the last DCQ interval

	total   uint64   // publishes let in since start
	del     delivery // how fast the tree takes them (delivery.go)
	capRate float64  // the most the tree delivered at a decrease since the last increase (or before it, if none since)
	probing bool     // an increase came after the last decrease: the next decrease starts a new capRate
	above   int      // increases past capRate since the last decrease (max probing)
}

// NewRegulator returns a pubend's regulator with an unlimited rate.
func NewRegulator(cfg Config) *Regulator { return &Regulator{cfg: cfg} }

// Limit is the current rate limit in events per second, 0 when unlimited.
func (r *Regulator) Limit() float64 { return r.limit }

// Measured is the rate publish acks were released at over the last DCQ
// interval, in events per second.
func (r *Regulator) Measured() float64 { return r.measured }

// Delivered is the rate, in events per second, at which the pubend's tree
// acknowledged its events over the last two seconds (Observe).
func (r *Regulator) Delivered() float64 { return r.del.rate }

// Observe tells the regulator the pubend's position (its latest assigned
// tick) and its ack prefix (everything at or below it is acknowledged by
// every downstream broker), once per tick after the publishes let in have
// their ticks. From them it measures the tree's delivery rate.
func (r *Regulator) Observe(position, acked tick.Tick) {
	r.del.observe(position, r.total, acked)
}

// Tick advances the regulator to now: it returns the DCQ to send when one is
// due (position is the pubend's latest assigned tick, m_pubend), and applies
// the hybrid increase (eq. 1) when the rate is throttled and no UCA has come
// for t_noUCA.
func (r *Regulator) Tick(now tick.Time, pubend msg.PubendID, position tick.Tick) (msg.DCQ, bool) {
	if !r.started {
		r.started, r.nextDCQ, r.quietAt, r.measuredAt, r.tokensAt = true, now, now, now, now
		// Sequence numbers start at the clock's millisecond so that a
		// restarted pubend's DCQs still number above its earlier ones, which
		// the intermediate brokers remember (Fig. 5 line 10).
		r.seq = uint64(max(0, now.Millis()))
	}
	if r.limit > 0 && now.Sub(r.quietAt) >= r.cfg.NoUCAInterval {
		if r.throttled {
			old := r.limit
			r.limit = Increase(r.cfg, r.limit, r.rDecr)
			if r.capRate > r.limit {
				// Our addition: half way back to the most the tree
				// delivered when it alerted, the way BIC-TCP searches, so that
				// a limit the delivery floor held low returns to the
				// bottleneck's rate in a few t_noUCA rather than by r_min
				// steps (eq. 1 alone: +2 events/s every 2 s).
				r.limit = max(r.limit, (r.limit+r.capRate)/2)
			} else if r.capRate > 0 {
				// Past it with no alert: the bottleneck may have widened
				// (E2's cap rising from 60 to 150 KB/s), and eq. 1 from a
				// rate near r_decr adds about r_min every t_noUCA, a
				// minute to find 80 events/s more. Our addition: the step
				// grows by r_min with every quiet t_noUCA above the last
				// measured bottleneck (2, 4, 6, … events/s), so the rate
				// finds a new one within a phase, while each step stays
				// small enough that a queue it starts is seen (a lag of
				// DenseQueueLag) before the next few; the first alert ends
				// it (eq. 2). Doubling steps, as BIC-TCP probes, outran
				// the alerts and overflowed the queue.
				r.above++
				r.limit = max(r.limit, old+r.cfg.RateMinIncrease*float64(r.above))
			}
		} else {
			// Publishers did not reach the limit for t_noUCA and nobody
			// alerted: the limit no longer says anything about the network
			// (our choice; §3.1 raises only a throttled rate). The next
			// alert starts again from the rate publishers achieve.
			r.limit, r.capRate = 0, 0
		}
		r.probing = true
		// An increase starts a new probe: the next alert answers it, and
		// comparing it with an alert from before would hide the overshoot.
		r.quietAt, r.throttled, r.havePrev = now, false, false
	}
	if now < r.nextDCQ {
		return msg.DCQ{}, false
	}
	if el := now.Sub(r.measuredAt); el > 0 {
		r.measured = float64(r.acked) / el.Seconds()
		r.acked, r.measuredAt = 0, now
		r.del.measure(now)
	}
	r.seq++
	r.nextDCQ = now.Add(r.cfg.DCQInterval)
	return msg.DCQ{Pubend: pubend, Seq: r.seq, Position: position}, true
}

// Decision says what a UCA did to the rate, for tests and traces.
type Decision uint8

const (
	// Held: the UCA answers a DCQ sent before the last decrease could take
	// effect (§3.1: the system had no time to react yet).
	Held Decision = iota
	// Improving: the alert's rates beat the previous alert's (§3.1).
	Improving
	// Decreased: the rate went down by eq. 2 or 3.
	Decreased
)

func (d Decision) String() string {
	return [...]string{"held", "improving", "decreased"}[d]
}

// OnUCA applies a UCA that reached the pubend. A UCA with an impossible rate
// is refused with ErrBadRate and changes nothing.
func (r *Regulator) OnUCA(now tick.Time, u msg.UCA) (Decision, error) {
	if bad(u.MinRec) || bad(u.MinNonRec) {
		return Held, fmt.Errorf("%w: %v", ErrBadRate, u)
	}
	r.quietAt = now
	if u.Seq < r.holdSeq {
		return Held, nil
	}
	improving := r.havePrev && improves(u, r.prevUCA)
	r.prevUCA, r.havePrev = u, true
	if improving {
		return Improving, nil
	}
	old := r.limit
	if old == 0 { // unlimited so far: start from what publishers achieved
		old = max(r.measured, r.cfg.RateMinIncrease)
		r.rDecr = old
	}
	next := max(Decrease(r.cfg, old, r.rDecr), r.cfg.RateMinIncrease)
	if d := r.del.rate; d > 0 && r.cfg.DeliveryFloor > 0 {
		// Our addition: eq. 2 and 3 lower the rate by fixed factors once
		// per DCQ, but an SHB behind a queue keeps alerting until it has
		// drained the events published before the decrease, which takes
		// the queue's delay, not one DCQ interval; by then repeated
		// halving would have taken the rate to r_min and left the
		// bottleneck idle (a collapse of throughput). So a decrease goes
		// no higher than what the tree delivered over the last two seconds
		// (the queue must shrink) and no lower than DeliveryFloor of it
		// (the bottleneck stays busy while it does).
		// Never above the old rate: while an SHB recovers, the ack prefix
		// moves at its recovery's pace through a stream published at
		// lower rates, faster than the bottleneck, and a "decrease" to half
		// of that raised the limit (E3 with a 256 KiB queue: 28.5 → 55.8
		// events/s on a recovering alert, and the recovering SHB's link
		// overflowed).
		next = min(max(min(next, d), r.cfg.DeliveryFloor*d, r.cfg.RateMinIncrease), max(old, r.cfg.RateMinIncrease))
		// The most the tree delivered while congested is the bottleneck's
		// rate: one two-second window may catch the acks' steps badly.
		// Measured afresh in each episode of decreases: a bottleneck that
		// tightened makes an older, higher measure a target the increase
		// would overshoot every t_noUCA (E2's 60 KB/s phases sawed
		// between 27 and 85 events/s on the offer's rate kept from the
		// start of the run).
		r.above = 0
		if r.probing {
			r.capRate, r.probing = d, false
		} else {
			r.capRate = max(r.capRate, d)
		}
	}
	r.limit = next
	r.rDecr = r.limit
	r.holdSeq = r.seq + 1
	r.tokens = min(r.tokens, r.burst())
	return Decreased, nil
}

// Release meters publish acks: given how many are waiting, it returns how
// many may go to publishers now. Unlimited, all may; limited, they go at the
// rate with a burst of a tenth of a second's worth (at least one).
func (r *Regulator) Release(now tick.Time, waiting int) int {
	if waiting <= 0 {
		return 0
	}
	if r.limit == 0 {
		r.acked += waiting
		r.total += uint64(waiting)
		return waiting
	}
	if el := now.Sub(r.tokensAt); el > 0 {
		r.tokens = min(r.tokens+r.limit*el.Seconds(), r.burst())
	}
	r.tokensAt = now
	n := min(int(r.tokens), waiting)
	r.tokens -= float64(n)
	r.acked += n
	r.total += uint64(n)
	if n < waiting {
		r.throttled = true
	}
	return n
}

// NextRelease is how long until Release can let one more ack go, for a
// runtime that wants to wake up then rather than poll.
func (r *Regulator) NextRelease() time.Duration {
	if r.limit == 0 || r.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - r.tokens) / r.limit * float64(time.Second))
}

func (r *Regulator) burst() float64 { return max(1, r.limit/10) }

// Increase is eq. 1 of Gryphon CC: additive by at least r_min, and
// multiplicative relative to the rate of the last decrease.
func Increase(cfg Config, old, rDecr float64) float64 {
	return max(old+cfg.RateMinIncrease, old+cfg.IncreaseFactor*(old-rDecr))
}

// Decrease is eq. 2 and 3 of Gryphon CC: the first decrease after an increase
// stays near the rate of the previous decrease; a second one in a row
// (rDecr == old) halves.
func Decrease(cfg Config, old, rDecr float64) float64 {
	if rDecr != old {
		return max(cfg.DecreaseFactor1*old, rDecr+cfg.DecreaseFactor2*(old-rDecr))
	}
	return cfg.DecreaseFactor1 * old
}

// improves says whether every kind of SHB alerting in u did better than in
// the previous alert (our reading of §3.1 "the throughput value in the UCA
// message is larger than the value in the previous message", with two
// values: a kind absent before cannot have improved).
func improves(u, prev msg.UCA) bool {
	any := false
	for _, p := range [][2]float64{{u.MinRec, prev.MinRec}, {u.MinNonRec, prev.MinNonRec}} {
		if math.IsInf(p[0], 1) {
			continue
		}
		if !(p[0] > p[1]) || math.IsInf(p[1], 1) {
			return false
		}
		any = true
	}
	return any
}

func bad(r float64) bool { return math.IsNaN(r) || r < 0 }
