package congestion

import (
	"math"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Monitor is an SHB's side of PDCC for one pubend (Gryphon CC, Middleware
// 2003 §3.1, §4): it samples how fast the doubt horizon moves through the
// pubend's tick time (dh_rate, eq. 11: tick-seconds per second, so the
// metric does not depend on which events match here or on the publication
// rate), smooths it (eq. 5), knows whether the SHB is recovering, and
// answers DCQs with a UCA when the SHB is congested (eq. 6–8).
type Monitor struct {
	cfg Config

	smoothed float64 // t̄; starts at 1 (keeping up)
	started  bool
	sampleAt tick.Time // last sample
	sampleDH tick.Tick // doubt horizon at the last sample

	// The pubend's position (m_pubend: its latest assigned tick) as last
	// told by a DCQ, and when that DCQ arrived. Ticks are pubend
	// milliseconds, so the pubend's present is about the position plus the
	// time since (clocks need only similar rates, §1.1 fn. 3).
	position   tick.Tick
	positionAt tick.Time
	known      bool

	recovering bool

	// moving counts the consecutive samples in which the doubt horizon
	// advanced: a stream this SHB receives densely (events in every
	// sample) rather than in steps of coalesced silence.
	moving int
	// step is how far, in ticks, the doubt horizon advanced in the last
	// sample in which it moved: the size of its steps when it hears of the
	// pubend's ticks as coalesced silence (queued).
	step time.Duration
}

// denseWindow: a doubt horizon that advanced in every sample for this long
// is fed by a dense stream of events, not by silence in steps of t_silence.
const denseWindow = time.Second

// NewMonitor returns an SHB's monitor for one pubend.
func NewMonitor(cfg Config) *Monitor { return &Monitor{cfg: cfg, smoothed: 1} }

// Rate is the smoothed doubt-horizon rate t̄ in tick-seconds per second.
func (m *Monitor) Rate() float64 { return m.smoothed }

// Recovering says whether the SHB is recovering this pubend's stream.
func (m *Monitor) Recovering() bool { return m.recovering }

// Lag is how far the doubt horizon dh trails the pubend's position at the
// last DCQ (eq. 7's m_pubend − m_SHB), 0 once dh has passed it.
func (m *Monitor) Lag(dh tick.Tick) time.Duration {
	if !m.known || dh >= m.position {
		return 0
	}
	return ms(m.position, dh)
}

func ms(hi, lo tick.Tick) time.Duration {
	return time.Duration(max(0, hi.Millis()-lo.Millis())) * time.Millisecond
}

// Observe takes a sample of the doubt horizon dh at now, at most every
// SampleInterval (eq. 5, 11), and updates whether the SHB is recovering.
// knownHi is the highest tick the SHB has heard of: it is recovering when
// that or the pubend's present is further past its doubt horizon than its
// receive window (§4: it would be ignoring ticks beyond it), or when, cut
// off from the pubend (no DCQ for two DCQ intervals, and at least
// KeepUpLag), its present is more than KeepUpLag past the doubt
// horizon (an outage, however short); it stops when the horizon is back
// within KeepUpLag of both.
func (m *Monitor) Observe(now tick.Time, dh, knownHi tick.Tick) {
	// Behind what it has heard of, or behind the pubend's present: during
	// an outage the SHB hears nothing, and it must know it is recovering
	// before its first nacks after the outage go out.
	hi := knownHi
	if m.known {
		hi = max(hi, m.position+tick.FromMillis(now.Sub(m.positionAt).Milliseconds()))
	}
	// DCQs arrive every DCQ interval while the SHB's path to the pubend
	// works: two intervals without one is an outage (a cut link, a
	// crashed or stalled upstream), and the last position says nothing
	// about the present any more.
	// Not less than KeepUpLag: on a loaded machine a DCQ every 250 ms
	// (BrokerConfig) comes half a second late now and then, and an SHB
	// whose silence comes in steps is more than KeepUpLag behind the
	// present between them; taken for cut off, it counted as recovering
	// and alerted by eq. 8 while it kept up (congestion-real-links.md §3).
	cutOff := m.known && now.Sub(m.positionAt) > max(2*m.cfg.DCQInterval, m.cfg.KeepUpLag)
	switch behind := ms(hi, dh); {
	case m.known && dh >= m.position && !cutOff:
		// It has everything the pubend had published: an idle stream
		// whose silence is still on its way (each hop coalesces it for up
		// to t_silence) is not a recovery.
		m.recovering = false
	case behind > m.cfg.ReceiveWindow:
		m.recovering = true
	case cutOff && behind > m.cfg.KeepUpLag:
		// Cut off for longer than KeepUpLag: the SHB must know it is
		// recovering before the link returns, or its first nacks ask for
		// the whole outage at once, past any NACK window (§3.2), and the
		// answers overflow the link's queue. The receive window alone
		// (§4) would leave every outage shorter than it unwindowed. Our
		// addition; once DCQs arrive again the rules above and below
		// decide, so a recovery ends within KeepUpLag as before.
		m.recovering = true
	case behind <= m.cfg.KeepUpLag:
		m.recovering = false
	}
	if !m.started || !m.known {
		// Before the first DCQ the SHB cannot tell lag from idleness; the
		// horizon it starts from may be far in the past (a new stream's
		// floor), so rates are measured from here on.
		m.started, m.sampleAt, m.sampleDH = true, now, dh
		return
	}
	el := now.Sub(m.sampleAt)
	if el < m.cfg.SampleInterval {
		return
	}
	t := 0.0
	if dh > m.sampleDH {
		t = float64(dh.Millis()-m.sampleDH.Millis()) / float64(el.Milliseconds())
		m.moving++
		m.step = ms(dh, m.sampleDH)
	} else {
		m.moving = 0
	}
	// One sample counts at most SampleMax: a horizon that jumps (the
	// silence of an outage arriving at once) must not hide later
	// congestion for long.
	t = min(t, m.cfg.SampleMax)
	if q := m.queued(now, dh); !q && (dh >= m.position || ms(knownHi, dh) <= m.cfg.KeepUpLag) {
		// Keeping up: the SHB has everything the pubend had published, or
		// all it has heard of but a moment. An idle pubend's silence comes
		// in steps of t_silence, so a pause is not a fall in rate. But
		// behind a queue (a link slower than the stream) the SHB hears of
		// ticks only as they arrive and so has "all it has heard of" all
		// the time: there the last DCQ, which jumps the queue, says how far
		// behind the pubend it is, and more than QueueLag is not keeping
		// up.
		t = max(t, 1)
	}
	m.smoothed = (1-m.cfg.Smoothing)*m.smoothed + m.cfg.Smoothing*t
	m.sampleAt, m.sampleDH = now, dh
}

// queued says whether the SHB is behind a queue: its doubt horizon more
// than QueueLag behind the pubend's position at the last DCQ, or, while the
// horizon moves in every sample (a dense stream, which cannot be waiting for
// coalesced silence), more than DenseQueueLag behind the pubend's present.
//
// A horizon that moves in steps (an SHB that hears of a busy pubend's ticks
// as silence, which each hop coalesces for up to t_silence) lags the
// position by up to a step for the silence it waits for, and by up to
// another for the phase of its upstream's flush, with no queue anywhere;
// so for it the lag must pass QueueLag plus two of its steps. Our addition
// (docs/known-issues/congestion-real-links.md §3): with QueueLag alone
// (500 ms in BrokerConfig, below t_silence) such an SHB's samples counted
// as measured, t̄ fell between the steps (α = 0.1 every 100 ms forgets 65 %
// of a step within the next second), and every second brought an alert,
// which took a busy pubend's rate to r_min. A queue still shows: the lag
// grows past any bound; eq. 7 bounds it at Δt_s.
// The DCQ jumps every queue on its way (Gryphon CC §3.1: DCQ and UCA are
// high-priority), so the difference is the time the SHB's events spend in
// queues; on a dense stream it grows from the first moment a link carries
// less than the pubend publishes, and is seen long before the queue is
// QueueLag deep.
func (m *Monitor) queued(now tick.Time, dh tick.Tick) bool {
	dense := m.moving >= int(denseWindow/m.cfg.SampleInterval)
	lim := m.cfg.QueueLag
	if !dense {
		lim += 2 * m.step
	}
	if ms(m.position, dh) > lim {
		return true
	}
	if !dense {
		// Silence may come in steps: past the position at the last DCQ
		// the SHB has all the pubend had published.
		return false
	}
	// The pubend publishes all the time (the horizon keeps moving), so its
	// present is its position at the last DCQ plus the time since.
	present := m.position + tick.FromMillis(now.Sub(m.positionAt).Milliseconds())
	return ms(present, dh) > m.cfg.DenseQueueLag
}

// OnDCQ records the pubend's position from a DCQ and returns the UCA this
// SHB answers with, if it is congested: recovering, when t̄ < 1 + Δt_rec
// (eq. 8); otherwise when t̄ < 1 − Δt_nonrec (eq. 6) or the doubt horizon
// lags the pubend's position by more than Δt_s (eq. 7).
func (m *Monitor) OnDCQ(now tick.Time, q msg.DCQ, dh tick.Tick) (msg.UCA, bool) {
	// The latest DCQ says where the pubend is, even below an earlier one:
	// a restarted PHB's clock may have stepped back, and keeping the
	// highest position would leave the SHB thinking itself behind forever.
	m.position, m.positionAt, m.known = q.Position, now, true
	u := msg.UCA{Pubend: q.Pubend, Seq: q.Seq, MinRec: math.Inf(1), MinNonRec: math.Inf(1)}
	if m.recovering {
		if m.smoothed < 1+m.cfg.RecThreshold {
			u.MinRec = m.smoothed
			return u, true
		}
		return u, false
	}
	lagging := q.Position > dh && time.Duration(q.Position.Millis()-dh.Millis())*time.Millisecond > m.cfg.LagThreshold
	if m.smoothed < 1-m.cfg.NonRecThreshold || lagging {
		u.MinNonRec = m.smoothed
		return u, true
	}
	return u, false
}
