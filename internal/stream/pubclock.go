package stream

import (
	"time"

	"github.com/aerie-mq/aerie/internal/tick"
)

// PubClockWindow is how long a sample of PubClock counts: the estimate is
// the smallest offset seen over about this long (docs/ARCHITECTURE.md
// "Decisions the sources leave open", 14). A path whose delay grows within
// it is measured against the delay before it grew; a pubend clock that
// steps back or drifts skews the estimate for at most this long.
const PubClockWindow = 30 * time.Second

// PubClock estimates, at a subend, the present of a pubend on the subend's
// own clock, without synchronised clocks (docs/CONCEPTS.md P8), for the
// delay curiosity threshold (Gryphon GD §3.2: a subend nacks when its doubt
// horizon trails real time by more than DCT).
//
// A tick is the pubend's millisecond, so every message that tells the
// pubend's position when it left gives a one-way sample: the local receive
// time minus the tick's time, which is the clocks' offset plus the path's
// delay at that moment (queues, coalescing of silence at each hop). As in
// NTP-like one-way estimates, the smallest sample over a window is the
// offset plus the path's least delay: queueing only ever adds, so it is
// the sample least disturbed by it. The estimated present, local time
// minus that offset, then trails the pubend's true present by the least
// delay of the path, never runs ahead of it (but for clock drift and steps
// within the window), and a stream whose messages arrive later than that
// shows how far behind it is.
//
// The minimum is kept over PubClockWindow with three samples, the best,
// second-best and third-best of successive parts of the window (Kathleen
// Nichols' windowed minimum, as in TCP BBR's min filter): constant memory,
// and the minimum moves up once its sample leaves the window.
type PubClock struct {
	s     [3]offset
	known bool
}

type offset struct {
	at tick.Time
	ms int64 // local receive millisecond - tick millisecond
}

// Sample records that a message telling tick t of the pubend's time (a
// first-time knowledge message's last tick, a DCQ's position) arrived at
// now.
func (c *PubClock) Sample(now tick.Time, t tick.Tick) {
	if t == 0 || t == tick.Max {
		return
	}
	v := offset{at: now, ms: now.Millis() - t.Millis()}
	win := tick.Time(PubClockWindow)
	if !c.known || v.ms <= c.s[0].ms || v.at-c.s[2].at > win {
		c.s = [3]offset{v, v, v}
		c.known = true
		return
	}
	switch {
	case v.ms <= c.s[1].ms:
		c.s[1], c.s[2] = v, v
	case v.ms <= c.s[2].ms:
		c.s[2] = v
	}
	dt := v.at - c.s[0].at
	switch {
	case dt > win:
		c.s[0], c.s[1], c.s[2] = c.s[1], c.s[2], v
		if v.at-c.s[0].at > win {
			c.s[0], c.s[1], c.s[2] = c.s[1], c.s[2], v
		}
	case c.s[1].at == c.s[0].at && dt > win/4:
		c.s[1], c.s[2] = v, v
	case c.s[2].at == c.s[1].at && dt > win/2:
		c.s[2] = v
	}
}

// Rebase restarts the estimate from one sample (Sample's arguments): the
// delay curiosity threshold nacked ticks that then arrived first-time
// (Subend.DelayFilled), so the path's delay now, or the pubend's clock now,
// is not what the window's minimum says. A smaller sample later lowers the
// estimate again at once.
func (c *PubClock) Rebase(now tick.Time, t tick.Tick) {
	if t == 0 || t == tick.Max {
		return
	}
	v := offset{at: now, ms: now.Millis() - t.Millis()}
	c.s, c.known = [3]offset{v, v, v}, true
}

// Offset returns the estimated offset in milliseconds (local clock minus
// the pubend's, plus the path's least delay), false before any sample.
func (c *PubClock) Offset() (int64, bool) { return c.s[0].ms, c.known }

// Present returns the estimated pubend present at local time now, less
// back (the first tick of that pubend millisecond), false before any
// sample.
func (c *PubClock) Present(now tick.Time, back time.Duration) (tick.Tick, bool) {
	if !c.known {
		return 0, false
	}
	return tick.FromMillis(now.Millis() - c.s[0].ms - back.Milliseconds()), true
}
