package congestion_test

import (
	"math"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// bottleneck is a pubend in front of a link that carries rate events per
// second: what the regulator lets in joins a FIFO queue, and the ack prefix
// is the tick of the last event through it. Time moves in 10 ms steps.
type bottleneck struct {
	r      *congestion.Regulator
	rate   float64
	now    tick.Time
	queue  []tick.Tick // ticks let in, not yet through the link
	served float64     // fractional events through the link
	acked  tick.Tick
	seq    uint64 // of the last DCQ
}

func (b *bottleneck) step(offered int) {
	b.now = b.now.Add(10 * time.Millisecond)
	pos := tick.FromMillis(b.now.Millis())
	for range b.r.Release(b.now, offered) {
		b.queue = append(b.queue, pos)
	}
	b.served += b.rate / 100
	for b.served >= 1 && len(b.queue) > 0 {
		b.acked, b.queue = b.queue[0], b.queue[1:]
		b.served--
	}
	if len(b.queue) == 0 {
		b.served = 0 // an idle link saves nothing up
	}
	b.r.Observe(pos, b.acked)
	if q, ok := b.r.Tick(b.now, "P", pos); ok {
		b.seq = q.Seq
	}
}

// run steps for d; with alert, the SHB behind the link answers every DCQ
// with a non-recovering alert.
func (b *bottleneck) run(d time.Duration, offered int, alert bool) {
	last := b.seq
	for end := b.now.Add(d); b.now < end; {
		b.step(offered)
		if alert && b.seq != last {
			last = b.seq
			b.r.OnUCA(b.now, msg.UCA{Pubend: "P", Seq: b.seq, MinRec: math.Inf(1), MinNonRec: 0.3})
		}
	}
}

// Gryphon CC's eq. 2 and 3 halve the rate on every DCQ while the SHB behind
// a queue still alerts; the queue drains only at the link's rate, so the
// rate would reach r_min and leave the link idle. With the delivery floor
// the limit stays between half the link's rate and the link's rate while
// the alerts go on, and returns near the link's rate once they stop.
func TestRegulatorHeldNearTheBottleneck(t *testing.T) {
	cfg := congestion.BrokerConfig()
	b := &bottleneck{r: congestion.NewRegulator(cfg), rate: 450}
	b.run(1500*time.Millisecond, 30, false) // 3000/s offered, unlimited: a queue builds
	if b.r.Limit() != 0 {
		t.Fatalf("limited before any alert: %g", b.r.Limit())
	}
	for i := range 40 { // 10 s of alerts, one per DCQ
		b.run(cfg.DCQInterval, 30, true)
		if l := b.r.Limit(); l < 0.45*b.rate || l > 1.1*b.rate {
			t.Fatalf("after %d alerts the limit is %.1f/s, want within [%.0f, %.0f] (delivered %.1f/s)",
				i+1, l, 0.45*b.rate, 1.1*b.rate, b.r.Delivered())
		}
	}
	b.run(20*time.Second, 30, false) // no more alerts: t_noUCA increases
	if l := b.r.Limit(); l < 0.9*b.rate {
		t.Fatalf("20 s without alerts the limit is %.1f/s, want back near the link's %.0f/s", l, b.rate)
	}
}

// With DeliveryFloor 0 the regulator is Table 1's alone: the same alerts
// take the rate down to r_min.
func TestRegulatorWithoutDeliveryFloorIsTable1(t *testing.T) {
	cfg := congestion.BrokerConfig()
	cfg.DeliveryFloor = 0
	b := &bottleneck{r: congestion.NewRegulator(cfg), rate: 450}
	b.run(1500*time.Millisecond, 30, false)
	b.run(40*cfg.DCQInterval, 30, true)
	if l := b.r.Limit(); l != cfg.RateMinIncrease {
		t.Fatalf("limit %.1f/s after 40 alerts, want r_min %g", l, cfg.RateMinIncrease)
	}
}

// An SHB behind a queue has all it has heard of at every moment (the link
// is FIFO), but the DCQs that jump the queue say how far behind the pubend
// it is: its rate samples count, t̄ falls and it alerts.
func TestMonitorBehindAQueueAlerts(t *testing.T) {
	cfg := congestion.BrokerConfig()
	m := congestion.NewMonitor(cfg)
	var alerted bool
	for ms := int64(0); ms <= 5000; ms += 10 {
		now := tick.Time(ms * int64(time.Millisecond))
		dh := tick.FromMillis(ms / 6) // the stream arrives at 1/6 of its pace
		m.Observe(now, dh, dh)        // and everything heard of is known
		if ms%250 == 0 {
			if _, ok := m.OnDCQ(now, msg.DCQ{Pubend: "P", Seq: uint64(ms), Position: tick.FromMillis(ms)}, dh); ok && ms <= 2000 {
				alerted = true
			}
		}
	}
	if !alerted {
		t.Fatalf("no alert within 2 s behind a queue; t̄ = %.3f", m.Rate())
	}
	if m.Rate() > 0.5 {
		t.Fatalf("t̄ = %.3f behind a queue that passes 1/6 of the stream's pace", m.Rate())
	}
}

// While an SHB recovers, the pubend's ack prefix moves at the recovery's
// pace through a stream published earlier, so the tree seems to deliver far
// more than the limit. A recovering alert must still never raise the limit
// (E3 with a 256 KiB queue: the delivery floor took a "decrease" from 28.5
// to 55.8 events/s, and the recovering SHB's link overflowed).
func TestDecreaseNeverRaisesTheLimit(t *testing.T) {
	cfg := congestion.DefaultConfig()
	b := &bottleneck{r: congestion.NewRegulator(cfg), rate: 400}
	b.run(2*time.Second, 4, false) // 400/s offered and delivered, unlimited
	b.rate = 0                     // an SHB's link fails: nothing is acknowledged
	for range 6 {                  // its recovering alerts lower the limit
		b.run(cfg.DCQInterval, 4, false)
		b.r.OnUCA(b.now, msg.UCA{Pubend: "P", Seq: b.seq, MinRec: 0.2, MinNonRec: math.Inf(1)})
	}
	low := b.r.Limit()
	if low == 0 || low > 100 {
		t.Fatalf("limit %.1f/s after six recovering alerts", low)
	}
	// The link returns and the SHB recovers fast: the ack prefix sweeps
	// through seconds of stream in a moment, while the SHB still alerts.
	b.rate = 20000
	for i := range 4 {
		b.run(cfg.DCQInterval, 4, false)
		b.r.OnUCA(b.now, msg.UCA{Pubend: "P", Seq: b.seq, MinRec: 0.9 - 0.1*float64(i), MinNonRec: math.Inf(1)})
		if l := b.r.Limit(); l > low {
			t.Fatalf("alert %d raised the limit from %.1f to %.1f/s (delivered %.1f/s)", i+1, low, l, b.r.Delivered())
		}
		low = b.r.Limit()
	}
}
