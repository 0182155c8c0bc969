package gd

import (
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// ccStream is one pubend's congestion control at this broker (Gryphon CC,
// Middleware 2003; the pure machines live in internal/congestion):
//
//   - at the pubend, the regulator sends a DCQ every DCQ interval and holds
//     publishes beyond the rate in admit, assigning them ticks only as the
//     rate allows (§4 "PHB Implementation": publishers are slowed through
//     their acks, nothing is dropped or refused);
//   - at every other broker, DCQs go on down and UCAs from below are folded
//     (Fig. 5) on their way up;
//   - at an SHB (a subend), the monitor answers DCQs with UCAs (eq. 6–8),
//     and while recovering the NACK window bounds what the subend nacks
//     (§3.2, SDCC).
type ccStream struct {
	reg   *congestion.Regulator
	admit []msg.Publish // pubend: publishes waiting for the rate
	// waiting holds the (publisher, seq) of every publish in admit: a
	// publisher that retries a publish still waiting adds nothing.
	waiting map[pubSeq]bool
	agg     *congestion.Aggregator
	mon     *congestion.Monitor
	nw      *congestion.NackWindow
	rec     bool // the subend was recovering at the last tick
	// samples is the subend's round-trip sample count when the NACK
	// window was last adjusted: it moves only on measured round trips.
	samples uint64
	// position is the pubend's latest assigned tick (m_pubend, §3.1).
	position tick.Tick
}

// ccOn reports whether congestion control runs (Config.CongestionControl;
// never in best-effort mode, which has no pubend streams to regulate).
func (e *Engine) ccOn() bool { return e.cfg.CongestionControl && !e.cfg.BestEffort }

func (e *Engine) initCC(ps *pstream) {
	if !e.ccOn() {
		return
	}
	cfg := e.cfg.Congestion
	if ps.pub != nil {
		ps.cc.reg = congestion.NewRegulator(cfg)
		return
	}
	ps.cc.agg = congestion.NewAggregator()
	ps.cc.mon = congestion.NewMonitor(cfg)
	ps.cc.nw = congestion.NewNackWindow(cfg)
	// A link congested by retransmissions is congested whether or not the
	// SHB counts as recovering yet: answers still arriving mean the
	// upstream is working through the nacks, so a repeat waits (§3.2).
	ps.sub.HoldRepeats = true
}

// admitNoAckMax bounds the publishes waiting for a pubend's rate that a
// publish asking for no ack still joins (admitPublish).
const admitNoAckMax = 16384

type pubSeq struct {
	publisher string
	seq       uint64
}

// admitPublish says whether a publish may take a tick now; if not, it
// waits in admit for the rate (tickCC releases it). A retry of a publish
// that has its tick already is answered at once (it costs the network
// nothing); a retry of one still waiting is dropped, the original stays.
// admit holds at most what publishers have unacknowledged: a publisher
// bounds that (the Go client at Options.MaxInflight). A publish that asks
// for no ack is bounded by nothing but the rate, so one that finds
// admitNoAckMax publishes waiting is dropped (at most once allows it;
// PublishesDropped counts it) rather than held without bound.
func (e *Engine) admitPublish(ps *pstream, m msg.Publish) bool {
	c := &ps.cc
	if c.reg == nil || ps.pub.Known(m.Publisher, m.Seq) {
		return true
	}
	k := pubSeq{m.Publisher, m.Seq}
	if c.waiting[k] {
		return false
	}
	if len(c.admit) == 0 && c.reg.Release(e.now, 1) == 1 {
		return true
	}
	if m.NoAck && len(c.admit) >= admitNoAckMax {
		e.stats.PublishesDropped++
		return false
	}
	if c.waiting == nil {
		c.waiting = map[pubSeq]bool{}
	}
	c.waiting[k] = true
	c.admit = append(c.admit, m)
	e.stats.PublishesHeld++
	return false
}

// tickCC runs congestion control's timers for one pubend.
func (e *Engine) tickCC(ps *pstream) {
	switch {
	case ps.cc.reg != nil:
		e.tickRegulator(ps)
	case ps.cc.mon != nil && ps.isSubend():
		e.tickMonitor(ps)
	}
}

func (e *Engine) tickRegulator(ps *pstream) {
	c := &ps.cc
	if n := c.reg.Release(e.now, len(c.admit)); n > 0 {
		held := c.admit[:n]
		c.admit = c.admit[n:]
		for _, m := range held {
			delete(c.waiting, pubSeq{m.Publisher, m.Seq})
			e.assign(ps, m)
		}
		if len(c.admit) == 0 {
			// Let the backing array and the map go after a burst: a
			// map keeps the buckets of its peak.
			c.admit, c.waiting = nil, nil
		}
	}
	c.reg.Observe(c.position, ps.in.AckPrefix)
	// m_pubend is the latest assigned tick (§3.1): an idle pubend's
	// position stays put, so its SHBs, whose horizons have passed it, are
	// not taken to lag while silence makes its way down.
	q, ok := c.reg.Tick(e.now, ps.id, c.position)
	if !ok {
		return
	}
	for _, o := range ps.outs {
		e.sendControlDown(ps.id, o.Down, q)
	}
	e.stats.DCQsSent++
}

// tickMonitor samples the doubt horizon (eq. 5, 11) and keeps the NACK
// window: recovery starts at nwnd_0, and the window opens and closes once
// per nack round trip (eq. 9–10). A non-recovering subend nacks without a
// window.
func (e *Engine) tickMonitor(ps *pstream) {
	c := &ps.cc
	if !ps.sub.FloorSet {
		return // no doubt horizon yet: the stream starts at its floor (docs/CONCEPTS.md P6)
	}
	dh := ps.in.K.DoubtHorizon()
	c.mon.Observe(e.now, dh, ps.in.K.KnownHi())
	rec := c.mon.Recovering()
	switch {
	case rec && !c.rec:
		c.nw.Reset()
		e.stats.Recoveries++
	case !rec:
		ps.sub.Window = 0
		c.rec = false
		return
	}
	c.rec = true
	// Adjust on fresh round-trip samples only: while nothing is answered
	// (the link is still down) the window must not grow on a stale RTT.
	if rtt, n := ps.sub.SRTT(); n != c.samples {
		c.samples = n
		c.nw.Adjust(e.now, rtt)
	}
	ps.sub.Window = c.nw.Limit(dh)
}

// onDCQ passes a pubend's query on down and, at an SHB, answers it.
func (e *Engine) onDCQ(from msg.NodeID, q msg.DCQ) {
	ps := e.pstreamOf(q.Pubend)
	if ps == nil || ps.pub != nil || ps.cc.mon == nil || e.cellOfNode(from) != ps.up {
		e.stats.CCIgnored++ // not from this pubend's upstream: not in its tree
		return
	}
	for _, o := range ps.outs {
		e.sendControlDown(ps.id, o.Down, q)
	}
	if !ps.isSubend() || !ps.sub.FloorSet {
		return
	}
	if u, ok := ps.cc.mon.OnDCQ(e.now, q, ps.in.K.DoubtHorizon()); ok {
		e.foldUCA(ps, u)
	}
}

// onUCA folds an alert from below on its way to the pubend, or applies it
// at the pubend (eq. 1–3).
func (e *Engine) onUCA(from msg.NodeID, u msg.UCA) {
	ps := e.pstreamOf(u.Pubend)
	if ps == nil || (ps.cc.reg == nil && ps.cc.agg == nil) || e.outFrom(ps, from) == nil {
		e.stats.CCIgnored++ // not from a downstream of this pubend's tree
		return
	}
	if ps.cc.reg != nil {
		if e.mut&MutNoRateDecrease != 0 {
			return
		}
		d, err := ps.cc.reg.OnUCA(e.now, u)
		switch {
		case err != nil:
			e.stats.CCIgnored++
		case d == congestion.Decreased:
			e.stats.RateDecreases++
		}
		return
	}
	e.foldUCA(ps, u)
}

// sendControlDown sends a DCQ to the member of cell c that carries the
// pubend, and nowhere when its link is down: control messages are not
// relayed sideways, the next round comes one DCQ interval later.
func (e *Engine) sendControlDown(p msg.PubendID, c msg.NodeID, m msg.Msg) {
	if to := e.pick(c, p); !e.multi() || e.live[to] {
		e.send(to, m)
	}
}

func (e *Engine) foldUCA(ps *pstream, u msg.UCA) {
	up, ok, err := ps.cc.agg.OnUCA(u)
	if err != nil {
		e.stats.CCIgnored++
		return
	}
	if ok {
		e.sendUp(ps, up)
		e.stats.UCAsSent++
	}
}

// CCState is one pubend's congestion control at this broker, for metrics
// and the simulator's oracle.
type CCState struct {
	Pubend msg.PubendID `json:"pubend"`
	// Pubend side: the rate limit in events/s (0: unlimited) and the
	// publishes waiting for it.
	Limit float64 `json:"limit"`
	Held  int     `json:"held"`
	// Delivered is how fast the pubend's tree acknowledged its events
	// lately, in events/s (congestion.Regulator.Delivered).
	Delivered float64 `json:"delivered"`
	// SHB side: smoothed doubt-horizon rate (tick-s/s), recovering, and
	// the NACK window in milliseconds of ticks (0 when not recovering).
	Rate       float64 `json:"rate"`
	Recovering bool    `json:"recovering"`
	NackWindow int64   `json:"nack_window_ms"`
}

// CCStates returns the congestion control state of every pubend whose
// stream is regulated or monitored here; nil when it is off.
func (e *Engine) CCStates() []CCState {
	if !e.ccOn() {
		return nil
	}
	var out []CCState
	for _, ps := range e.streams {
		s := CCState{Pubend: ps.id}
		switch {
		case ps.cc.reg != nil:
			s.Limit, s.Held, s.Delivered = ps.cc.reg.Limit(), len(ps.cc.admit), ps.cc.reg.Delivered()
		case ps.isSubend():
			s.Rate, s.Recovering = ps.cc.mon.Rate(), ps.cc.mon.Recovering()
			if s.Recovering {
				s.NackWindow = ps.cc.nw.Size().Milliseconds()
			}
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// describeCC adds the congestion control line of Describe, when it runs.
func (e *Engine) describeCC(b *strings.Builder, ps *pstream) {
	switch c := &ps.cc; {
	case c.reg != nil:
		fmt.Fprintf(b, "        cc limit %s held %d\n", rateOf(c.reg.Limit()), len(c.admit))
	case c.mon != nil && ps.isSubend():
		fmt.Fprintf(b, "        cc t̄ %.3f recovering %v", c.mon.Rate(), c.mon.Recovering())
		if c.mon.Recovering() {
			fmt.Fprintf(b, " nack window %v", c.nw.Size())
		}
		b.WriteString("\n")
	}
}

func rateOf(r float64) string {
	if r == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.1f/s", r)
}
