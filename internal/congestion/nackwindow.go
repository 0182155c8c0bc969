package congestion

import (
	"time"

	"github.com/aerie-mq/aerie/internal/tick"
)

// NackWindow is SDCC (Gryphon CC, Middleware 2003 §3.2, §4): the part of the
// stream past the doubt horizon a recovering SHB may nack now. It starts at
// nwnd_0 and, once per round trip, compares the recovery rate r_SHB =
// nwnd / RTT (eq. 9) with the previous round's: up by at least α_NACK opens
// it by size_NACK, down by at least β_NACK closes it by size_NACK (eq. 10),
// like TCP Vegas. With a steady RTT the window grows while a step is worth
// α_NACK of it, so it settles near size_NACK/α_NACK (about 1 s of ticks with
// Table 1, §5 E1 saw ~900 tickms); a growing RTT, the sign of queues, closes
// it.
type NackWindow struct {
	cfg      Config
	size     time.Duration // nwnd, in pubend time
	prevRate float64       // r_SHB of the last round, 0 before one
	roundAt  tick.Time     // start of the current round
	started  bool
}

// NewNackWindow returns a window of nwnd_0.
func NewNackWindow(cfg Config) *NackWindow {
	return &NackWindow{cfg: cfg, size: cfg.NackWindowInitial}
}

// Size is the window's width in pubend time (tickms).
func (w *NackWindow) Size() time.Duration { return w.size }

// Limit is the last tick a recovering SHB may nack when its doubt horizon is
// dh.
func (w *NackWindow) Limit(dh tick.Tick) tick.Tick {
	return dh + tick.FromMillis(w.size.Milliseconds())
}

// Reset starts a recovery afresh at nwnd_0.
func (w *NackWindow) Reset() {
	*w = NackWindow{cfg: w.cfg, size: w.cfg.NackWindowInitial}
}

// Adjust runs one step of eq. 9–10 when a round trip rtt (the SHB's current
// estimate of the time to satisfy a nack) has passed since the last step; it
// reports whether the window changed.
func (w *NackWindow) Adjust(now tick.Time, rtt time.Duration) bool {
	if rtt <= 0 {
		return false
	}
	if !w.started {
		w.started, w.roundAt = true, now
		return false
	}
	if now.Sub(w.roundAt) < rtt {
		return false
	}
	w.roundAt = now
	rate := w.size.Seconds() / rtt.Seconds()
	prev := w.prevRate
	w.prevRate = rate
	switch {
	case prev == 0:
		// The first round only measures; and the rate after a change is
		// the next round's reference either way.
		w.size += w.cfg.NackSize // open once to probe, like slow start's first step
		return true
	case rate >= prev*(1+w.cfg.NackAlpha):
		w.size += w.cfg.NackSize
		return true
	case rate <= prev*(1-w.cfg.NackBeta) && w.size > w.cfg.NackSize:
		w.size -= w.cfg.NackSize
		return true
	}
	return false
}
