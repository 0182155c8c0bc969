package gd

import (
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The release protocol of durable subscriptions (Gryphon DS, DSN 2003 §3;
// docs/CONCEPTS.md "Durable subscriptions"). Every broker keeps, per pubend, two values for the SHBs of
// its subtree and sends them up on its acks (msg.Ack, docs/CONCEPTS.md P11):
//
//   - delivered (T_d): the minimum latestDelivered(p) of those SHBs. An SHB
//     acks only what it delivered to its consolidated stream, and a broker's
//     ack prefix is the minimum of its downstreams' extended over ticks
//     that are silent or filtered out for them, so T_d is the ack prefix
//     unless a downstream reports a lower delivered value.
//   - released (T_r): the minimum released(p) of those SHBs, where an SHB's
//     released(p) = min(latestDelivered(p), min_s released(s,p)) over its
//     durable subscribers s (§4.1). The durable layer gives the engine that
//     minimum as a ReleaseFloor; without one, released = latestDelivered
//     (docs/CONCEPTS.md P9: non-durable SHBs report released = latestDelivered).
//
// At the pubend they are T_r(p) <= T_d(p), and the pubend turns tick t into
// L only when t <= T_r or (t <= T_d and T(p) − t > maxRetain) (§3, the
// PHB-controlled early-release policy): never beyond T_d, so a subscriber
// of a consolidated stream never gets a gap. The pubend's L prefix is its
// release point: what retention may drop from its log (Engine.Released).
// Without durable subscribers T_r = T_d = the ack prefix everywhere and the
// pubend releases what every downstream acked, as before.

// ReleaseFloor sets (or, with Clear, removes) the minimum released(s,p)
// over the durable subscribers this broker hosts for pubend Pubend: the
// latest tick every one of them, connected or not, has acknowledged
// (Gryphon DS, DSN 2003 §3, §4.1). The broker's released value for the
// pubend is then min(latestDelivered, T). The durable-subscription layer
// steps it whenever that minimum changes, and after a restart before the
// engine's first ack goes out (the engine keeps it as soft state). A floor
// below what the broker already reported released holds nothing back: those
// ticks may be L at the pubend already, and a subscriber that needed them
// gets a gap.
type ReleaseFloor struct {
	Pubend msg.PubendID
	T      tick.Tick
	// Clear: no durable subscriber holds the pubend back here any more;
	// released follows latestDelivered again.
	Clear bool
}

func (ReleaseFloor) isInput() {}

// release is one pubend stream's release-protocol state.
type release struct {
	released  tick.Tick // T_r of the subtree, this broker included
	delivered tick.Tick // T_d of the subtree, this broker included
	floor     tick.Tick // ReleaseFloor, when floorSet
	floorSet  bool
	relSent   tick.Tick // released and delivered on the last ack sent
	delSent   tick.Tick
	heldSent  bool // whether the last ack sent said "held" (ackReleased)
	// held: durable subscribers here or below hold the release (a floor is
	// set, or a downstream reported released below its ack prefix); see
	// ackReleased.
	held bool
	// lastD (pubend): the highest event tick made L, for the gaps of
	// catch-up replays (replay.go): released ticks above it were silence.
	// It starts at the L prefix the pubend restarted with, not knowing
	// what that held.
	lastD     tick.Tick
	lastDInit bool
}

func (e *Engine) setReleaseFloor(in ReleaseFloor) error {
	ps := e.pstreamOf(in.Pubend)
	if ps == nil {
		return fmt.Errorf("gd: broker %s: release floor for pubend %s, which is not routed here", e.id, in.Pubend)
	}
	ps.rel.floorSet, ps.rel.floor = !in.Clear, in.T
	if in.Clear {
		ps.rel.floor = 0
	}
	e.updateAck(ps) // moves released, and at a pubend its L
	e.ackIfNowHeld(ps)
	return nil
}

// ackIfNowHeld acks at once when the release became held here since the
// last ack: until upstream learns it, it reads the last ack's "nothing
// held" and may release, over ticks filtered out for this subtree, what a
// durable subscriber here needs. Sent now, the ack precedes on the FIFO
// link any narrower summary that would filter those ticks out (seed 1598:
// a subscriber that went away 320 ms after it started).
func (e *Engine) ackIfNowHeld(ps *pstream) {
	if r := &ps.rel; ps.pub == nil && r.held && !r.heldSent && !e.cfg.BestEffort {
		e.sendAck(ps)
	}
}

// updateRelease recomputes T_d and T_r after the ack prefix, a downstream's
// values or the floor changed. A downstream cell whose released (or
// delivered) value is below its ack prefix holds this broker at that value;
// one that reports them equal to its ack prefix holds nothing back, and the
// ack prefix (which already waits for it, except on ticks silent or
// filtered out for it) bounds both. Holding at the reported value is
// conservative: it does not extend over ticks filtered out for that
// downstream, because a broker makes acked ticks final and can no longer
// tell them apart. A cell's released value is the lowest of its members'
// latest reports, its delivered value the highest (Ostream.ReleasedBy,
// onAck). Both values at this broker never move back.
func (e *Engine) updateRelease(ps *pstream) {
	r := &ps.rel
	d := ps.in.AckPrefix
	for _, o := range ps.outs {
		if o.Delivered < o.AckPrefix && !o.Gone {
			d = min(d, o.Delivered) // a gone downstream holds nothing (gone.go)
		}
	}
	r.delivered = max(r.delivered, d)
	rel := r.delivered
	if r.floorSet {
		rel = min(rel, r.floor)
	}
	r.held = r.floorSet
	for _, o := range ps.outs {
		// A downstream not heard from since this broker started holds
		// everything: a restart forgot what the SHBs below said, and
		// reading their silence as "nothing held" would release what a
		// durable subscriber there, away, still needs.
		if !o.Reported || o.Released < o.AckPrefix {
			rel = min(rel, o.Released)
			r.held = true
		}
	}
	r.released = max(r.released, rel)
	if ps.pub != nil {
		e.releasePubend(ps)
	}
}

// ackReleased is the released value an ack carries. Where durable
// subscribers hold the release it is kept below the ack prefix, even when
// they have acknowledged everything up to it: an upstream broker reads a
// released value equal to the ack prefix as "nothing held back here" and
// extends its own over ticks silent or filtered out for this subtree, and a
// durable subscriber that disconnected (its filter narrowed) still needs
// them (Gryphon DS §3: an SHB releases t only once all its durable
// subscribers, connected or not, acknowledged t). One tick held back is
// released with the next ack that moves.
func (r *release) ackReleased(ackPrefix tick.Tick) tick.Tick {
	if r.held && r.released >= ackPrefix && ackPrefix > 0 {
		return ackPrefix - 1
	}
	return r.released
}

// releasePubend turns into L every tick the release rule allows (Gryphon DS,
// DSN 2003 §3): t <= T_r, or t <= T_d and T(p) − t > maxRetain. T(p) is the
// pubend's present; it moves with the clock, so the timer calls this too.
func (e *Engine) releasePubend(ps *pstream) {
	l := ps.rel.released
	if keep := e.cfg.MaxRetain; keep > 0 {
		now, age := tick.FromMillis(e.now.Millis()), ticksOf(keep)
		if now > age+1 {
			bound := ps.rel.delivered
			if e.mut&MutReleaseEarly != 0 {
				bound = ps.pub.Announced // broken on purpose: past what downstream has
			}
			l = max(l, min(bound, now-age-1)) // t <= now-age-1 ⟺ now − t > maxRetain
		}
	}
	if lim := e.cfg.MaxRetainBytes; lim > 0 {
		bound := ps.rel.delivered
		if e.mut&MutReleaseEarly != 0 {
			bound = ps.pub.Announced // broken on purpose: past what downstream has
		}
		l = max(l, e.overRetained(ps, lim, bound))
	}
	if r := &ps.rel; !r.lastDInit {
		r.lastD, r.lastDInit = ps.in.K.Final(), true
	}
	if old := ps.in.K.Final(); l > old {
		ps.in.K.Visit(tick.Range{Lo: old + 1, Hi: l}, func(r tick.Range, k tick.Kind, _ *msg.Event) bool {
			if k == tick.D {
				ps.rel.lastD = r.Hi
			}
			return true
		})
	}
	if l > ps.in.K.Final() {
		e.vouchAll(ps)
	}
	if ps.in.K.SetFinal(l) {
		noteSkipped(ps)
		ps.in.C.RemoveBelow(l)
		ps.delivered = max(ps.delivered, l)
		ps.cache.release(ps.in.K.Final())
		ps.retained.release(ps.in.K.Final())
	}
}

// tickRelease runs after every timer tick: a pubend's early release moves
// with time, and an ack goes up when only the release values moved (the ack
// prefix's own timer sends it when the prefix moved), at most every
// AckInterval (docs/CONCEPTS.md P11).
func (e *Engine) tickRelease() {
	if e.cfg.BestEffort {
		return
	}
	for _, ps := range e.streams {
		if ps.pub != nil {
			e.releasePubend(ps)
			continue
		}
		r := &ps.rel
		moved := r.released > r.relSent || r.delivered > r.delSent || r.held != r.heldSent || e.cleanerAck(ps)
		if moved && e.now.Sub(ps.ackSentAt) >= e.cfg.AckInterval {
			e.sendAck(ps)
		}
	}
}

// ReleaseState is one pubend's release-protocol state at this broker, for
// the oracle (docs/CONCEPTS.md I10) and for operators.
type ReleaseState struct {
	Pubend    msg.PubendID
	Hosted    bool
	Final     tick.Tick // L prefix; at the pubend, what the release rule made L
	AckPrefix tick.Tick
	Released  tick.Tick // T_r
	Delivered tick.Tick // T_d
	Floor     tick.Tick // ReleaseFloor, when FloorSet
	FloorSet  bool
	// Now is the pubend's present T(p) as a tick (at every broker, its
	// clock) and MaxRetain its early release bound (hosted pubends only).
	Now       tick.Tick
	MaxRetain time.Duration
	// GoneAfter is the pubend host's max_retain, at least GoneMin, which
	// judges this broker's downstreams gone (gone.go; 0: never).
	GoneAfter time.Duration
	// MaxRetainBytes is its size bound (hosted pubends only; 0: none).
	MaxRetainBytes int64
	// RetainedBytes and RetainedEvents are what its logged, unreleased
	// events take (hosted pubends only): what the bounds hold.
	RetainedBytes  int64
	RetainedEvents int
	// Downstream holds, per downstream cell, its ack prefix and the
	// release values it reported.
	Downstream []DownRelease
}

// DownRelease is what one downstream cell reported.
type DownRelease struct {
	Cell                           msg.NodeID
	AckPrefix, Released, Delivered tick.Tick
	// Gone: it acknowledged nothing for longer than GoneAfter (gone.go).
	Gone bool
}

// ReleaseStates returns the release state of every pubend stream, sorted by
// pubend.
func (e *Engine) ReleaseStates() []ReleaseState {
	return e.ReleaseStatesInto(make([]ReleaseState, 0, len(e.streams)))
}

// ReleaseStatesInto is ReleaseStates written over buf (its Downstream
// slices reused too), so that a caller after every step (the simulator's
// oracle) need not allocate. The result is valid until the next call with
// the same buf.
func (e *Engine) ReleaseStatesInto(buf []ReleaseState) []ReleaseState {
	out := buf[:0]
	for i, ps := range e.streams {
		var down []DownRelease
		if i < len(buf) {
			down = buf[i].Downstream[:0]
		}
		st := ReleaseState{
			Pubend: ps.id, Hosted: ps.pub != nil, Final: ps.in.K.Final(), AckPrefix: ps.in.AckPrefix,
			Released: ps.rel.released, Delivered: ps.rel.delivered, Floor: ps.rel.floor, FloorSet: ps.rel.floorSet,
			Now: tick.FromMillis(e.now.Millis()), GoneAfter: e.goneBound(ps),
		}
		if ps.pub != nil {
			st.MaxRetain, st.MaxRetainBytes = e.cfg.MaxRetain, e.cfg.MaxRetainBytes
			st.RetainedBytes, st.RetainedEvents = ps.retainedTotal()
		}
		for _, o := range ps.outs {
			down = append(down, DownRelease{Cell: o.Down, AckPrefix: o.AckPrefix, Released: o.Released, Delivered: o.Delivered, Gone: o.Gone})
		}
		st.Downstream = down
		out = append(out, st)
	}
	return out
}
