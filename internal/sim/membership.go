package sim

// Membership in the simulator (issue 6 item 2): every simulated broker runs
// the view layer (internal/member: seed 001's needs, docs/MEMBERSHIP.md)
// over a simulated failure detector, and its installed views drive the
// overlay the way the broker runtime does (internal/broker/membership.go).
//
// The model, decided here:
//
//   - Member traffic is memberlist's own UDP/TCP, not the overlay's links:
//     any two brokers can talk unless one of them is down or cut off from
//     the network (a partition, a hang). A single cut or stalled overlay
//     link does not stop it: SWIM's indirect probes route around one broken
//     path. Messages take 1–20 ms, are lost with the run's loss probability
//     when the loss fault is on, and are lost when the pair is cut off at
//     sending or arrival.
//   - The failure detector reports a peer Failed 300–900 ms after it
//     crashed or became unreachable (partition, hang), unless it came back
//     first, and Alive 5–150 ms after it (re)started or became reachable
//     again, in order per observer and incarnation, like memberlist's
//     incarnation-ordered updates. A restart is a new incarnation whose
//     boot nonce is the engine's incarnation (it grows). A (re)started
//     member is handed the view of one reachable peer, as memberlist's
//     push/pull join does.
//   - A broker that leaves (fault "leave") does what the broker does on
//     shutdown: its view layer says Bye to every member it can reach
//     (memberlist's reliable stream: not subject to the loss fault), then
//     it stops like a crash and restarts later as a new incarnation. The
//     others' detectors learn of its departure 5–150 ms after it stopped
//     (memberlist's leave is gossiped, not a probe timeout) and report it
//     as Failed, as memberlist v0.7 does for a leave too; the Bye makes it
//     a leave (no Departed, as with the real adapter).
//   - A hung broker (fault "hang") answers nothing: its member state is
//     frozen and its overlay links stall, for 2–3 s, then it crashes (seed
//     000 §4.2: "stall, then fail"). Its engine keeps running for its local
//     clients; nothing it sends gets out, and a link of it that a fault
//     heals meanwhile stays down (no handshake completes) until redialled.
//   - When a broker installs a view that removes a neighbour's live
//     incarnation (Crashed, Left or Dropped), it closes its connection to
//     it, as the broker runtime does: both ends get gd.LinkDown, and the
//     link reconnects by the usual rule (the downstream redials every
//     50–500 ms) once both ends are up and reachable. A stalled broker is
//     thus routed around one detection after it stalled instead of when its
//     links fail.
//
// Everything is drawn from the run's member sub-seed, so the GD part of a
// run changes only where a view closes a connection.

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/oracle"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Timings of the simulated failure detector and member network (the
// member package's own harness uses the same: internal/member/sim_test.go).
var (
	fdDetect   = [2]time.Duration{300 * time.Millisecond, 900 * time.Millisecond}
	fdGossip   = [2]time.Duration{5 * time.Millisecond, 150 * time.Millisecond}
	memDelay   = [2]time.Duration{time.Millisecond, 20 * time.Millisecond}
	redialWait = [2]time.Duration{50 * time.Millisecond, 500 * time.Millisecond}
)

const memTick = 50 * time.Millisecond

// fdKey names what one observer's failure detector says about one
// incarnation.
type fdKey struct {
	obs  msg.NodeID
	subj member.ID
}

func (w *world) between(r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(w.mrng.Int64N(int64(r[1]-r[0])))
}

// memberID is the incarnation n runs (or ran last, when down).
func memberID(n *node) member.ID {
	return member.ID{Broker: string(n.id), BootNonce: uint64(n.inc) + 1}
}

func (n *node) memberSelf() member.Member {
	return member.Member{ID: memberID(n), Meta: member.Meta{Cell: string(n.cell), Role: n.broker.Role.String()}}
}

// reachable: a and b can exchange member traffic.
func (w *world) reachable(a, b *node) bool {
	return a.up && b.up && !a.hung && !b.hung && w.now >= a.isolatedUntil && w.now >= b.isolatedUntil
}

// startMember gives n's new incarnation a fresh view layer.
func (w *world) startMember(n *node) {
	if w.plan.noMembership {
		return
	}
	n.mem = member.New(member.Config{Self: n.memberSelf(), ViewBundling: 100 * time.Millisecond, TickInterval: memTick,
		Unfenced: w.opts.Unfenced})
	inc := n.inc
	w.memStep(n, member.Tick{})
	w.after(w.between([2]time.Duration{0, memTick}), func() { w.memTickLoop(n, inc) })
	// memberlist's push/pull join: the first reachable peer's view.
	for _, id := range w.order {
		p := w.nodes[id]
		if p == n || !w.reachable(n, p) || p.mem == nil {
			continue
		}
		if v, ok := p.mem.LocalState(); ok {
			from := memberID(p)
			w.after(w.between(fdGossip), func() {
				if n.up && n.inc == inc {
					w.memStep(n, member.Recv{From: from, Msg: member.Message{Kind: member.Announce, View: &v}})
				}
			})
			break
		}
	}
	w.fdChanged(n)
}

func (w *world) memTickLoop(n *node, inc int) {
	if !n.up || n.inc != inc {
		return
	}
	w.memStep(n, member.Tick{})
	w.after(memTick, func() { w.memTickLoop(n, inc) })
}

// memStep feeds one input to n's view layer and carries out its Ready.
func (w *world) memStep(n *node, in member.Input) {
	if !n.up || n.hung || n.mem == nil {
		return // a hung broker's member state is frozen
	}
	if err := n.mem.Step(w.localNow(n), in); err != nil {
		panic(fmt.Sprintf("sim: %s member: %v", n.id, err))
	}
	for n.mem.HasReady() {
		rd := n.mem.Ready()
		n.mem.Advance(rd)
		for _, c := range rd.Installed {
			w.views++
			w.leftInViews += len(c.Left)
			w.watchf("view %s at %s", c.View, memberID(n))
			w.orc.ViewInstalled(memberID(n), c.View)
			w.viewChanged(n, c)
		}
		for _, e := range rd.Send {
			w.memSend(n, e)
		}
	}
}

// memSend carries one member message over memberlist's network.
func (w *world) memSend(from *node, e member.Envelope) {
	to := w.nodes[msg.NodeID(e.To.Broker)]
	if to == nil || !w.reachable(from, to) {
		return
	}
	if w.plan.lossProb > 0 && w.mrng.Float64() < w.plan.lossProb {
		return
	}
	src := memberID(from)
	w.after(w.between(memDelay), func() {
		if to.up && memberID(to) == e.To && w.reachable(from, to) {
			w.memStep(to, member.Recv{From: src, Msg: e.Msg})
		}
	})
}

// fdChanged: n started, crashed, hung or was cut off, or came back; every
// failure detector that watches n or that n runs learns it.
func (w *world) fdChanged(n *node) {
	for _, id := range w.order {
		o := w.nodes[id]
		if o == n || !o.up {
			continue
		}
		w.fdReport(o, n)
		if n.up {
			w.fdReport(n, o)
		}
	}
}

// fdReport schedules what obs's failure detector will say about subj's
// incarnation: Failed after a detection delay if it is unreachable now,
// else Alive after a gossip delay. A later change for the same pair
// supersedes a report not yet made (an unreachable peer that came back
// before detection is never declared failed).
func (w *world) fdReport(obs, subj *node) {
	if w.opts.FDSilent {
		return
	}
	k := fdKey{obs.id, memberID(subj)}
	w.fdGen[k]++
	gen := w.fdGen[k]
	var in member.Input = member.Failed{ID: k.subj}
	d := fdDetect
	if subj.leaving {
		d = fdGossip // memberlist's leave is broadcast
	}
	if w.reachable(obs, subj) {
		in, d = member.Alive{Member: subj.memberSelf()}, fdGossip
	}
	at := w.now.Add(w.between(d))
	if last := w.fdAt[k]; at <= last {
		at = last + 1
	}
	w.fdAt[k] = at
	inc := obs.inc
	w.at(at, func() {
		if obs.up && obs.inc == inc && w.fdGen[k] == gen {
			w.memStep(obs, in)
		}
	})
}

// viewChanged closes n's connections to the neighbour incarnations its new
// view removed, as the broker runtime does on the same event.
func (w *world) viewChanged(n *node, c member.Change) {
	for _, gone := range [][]member.Member{c.Crashed, c.Left, c.Dropped} {
		for _, m := range gone {
			peer := w.nodes[msg.NodeID(m.ID.Broker)]
			if peer == nil || !peer.up || memberID(peer) != m.ID {
				continue
			}
			l := w.byPair[pairKey(n.id, peer.id)]
			if l == nil || !l.up {
				continue
			}
			w.watchf("view %d at %s drops %s", c.View.ID, n.id, peer.id)
			w.viewDrops++
			if peer.hung {
				w.routedAround++
			}
			w.cut(l)
			w.resetLink(l)
		}
	}
}

// resetLink marks a down link as one the brokers will redial.
func (w *world) resetLink(l *link) {
	l.reset = true
	w.after(w.between(redialWait), func() { w.redial(l) })
}

// redial reconnects a link a view closed, once both ends are up and
// reachable; a fault that cut the link meanwhile heals it by its own rule.
func (w *world) redial(l *link) {
	if !l.reset {
		return
	}
	if w.reachable(w.nodes[l.a], w.nodes[l.b]) {
		w.heal(l)
		return
	}
	w.after(w.between(redialWait), func() { w.redial(l) })
}

// isolate cuts n off memberlist's network until the given time (a
// partition); its overlay links are cut by the caller.
func (w *world) isolate(n *node, until tick.Time) {
	if until <= n.isolatedUntil {
		return
	}
	was := w.now < n.isolatedUntil
	n.isolatedUntil = until
	if !was {
		w.fdChanged(n)
	}
	w.at(until, func() {
		if n.isolatedUntil == until {
			w.fdChanged(n)
		}
	})
}

// hang: n stops answering (seed 000 §4.2: a broker stalls for 2–3 s, then
// fails). Its overlay links accept and do not forward, memberlist probes go
// unanswered, its member state is frozen; then it crashes and restarts.
func (w *world) hang(n *node, r func(lo, hi int) time.Duration) {
	if !n.up || n.hung {
		return
	}
	w.watchf("hang %s", n.id)
	n.hung = true
	w.hangs++
	w.fdChanged(n)
	for _, l := range w.links {
		if (l.a == n.id || l.b == n.id) && l.up {
			l.stalled = true
		}
	}
	inc := n.inc
	w.after(r(2000, 3000), func() {
		if !n.hung || n.inc != inc {
			return
		}
		for _, l := range w.links {
			if (l.a == n.id || l.b == n.id) && l.up {
				l.stalled = false // the links fail with the broker (crash resets them)
			}
		}
		n.hung = false
		w.crash(n)
		w.after(r(300, 5000), func() {
			if !w.healed {
				w.restart(n)
			}
		})
	})
}

// scheduleHangs draws hang faults from their own sub-seed.
func (w *world) scheduleHangs() { w.scheduleWhole(FaultHang, w.hrng, w.hang) }

// leave: n leaves gracefully, as the broker does on shutdown (mlist's Run:
// Bye to every member, then memberlist's leave), stops like a crash (the
// engine is crash-only), and restarts later as a new incarnation.
func (w *world) leave(n *node, r func(lo, hi int) time.Duration) {
	if !n.up || n.hung || n.mem == nil {
		return
	}
	w.watchf("leave %s", n.id)
	w.leaves++
	w.orc.Left(memberID(n))
	n.mem.Leave()
	for n.mem.HasReady() {
		rd := n.mem.Ready()
		n.mem.Advance(rd)
		for _, e := range rd.Send {
			w.sendBye(n, e)
		}
	}
	inc := n.inc
	// The adapter stops memberlist once its Byes are sent.
	w.after(memDelay[1], func() {
		if !n.up || n.inc != inc || n.hung || w.healed {
			return // healing restarted every broker: one that stopped now would stay down (seed 48)
		}
		n.leaving = true
		w.crash(n)
		n.leaving = false
		w.after(r(300, 5000), func() {
			if !w.healed {
				w.restart(n)
			}
		})
	})
}

// sendBye carries a goodbye over memberlist's reliable stream: lost only
// if the pair cannot reach each other.
func (w *world) sendBye(from *node, e member.Envelope) {
	to := w.nodes[msg.NodeID(e.To.Broker)]
	if to == nil || !w.reachable(from, to) {
		return
	}
	src := memberID(from)
	w.after(w.between(memDelay), func() {
		if to.up && memberID(to) == e.To && w.reachable(from, to) {
			w.orc.ByeReceived(src, e.To)
			w.memStep(to, member.Recv{From: src, Msg: e.Msg})
		}
	})
}

// scheduleLeaves draws leave faults from their own sub-seed.
func (w *world) scheduleLeaves() { w.scheduleWhole(FaultLeave, w.lrng, w.leave) }

// scheduleWhole injects fault, which takes a whole broker, at random
// brokers and times drawn from r until the network heals.
func (w *world) scheduleWhole(fault string, r *rand.Rand, inject func(*node, func(lo, hi int) time.Duration)) {
	if !w.plan.faults[fault] {
		return
	}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo)) * time.Millisecond }
	var next func()
	next = func() {
		if w.healed {
			return
		}
		inject(w.nodes[w.order[r.IntN(len(w.order))]], ms)
		w.after(time.Duration(r.Int64N(int64(6*w.plan.faultEvery))), next)
	}
	w.after(time.Duration(r.Int64N(int64(3*w.plan.faultEvery))), next)
}

// unhangAll ends every hang and isolation when the fault phase ends.
func (w *world) unhangAll() {
	for _, id := range w.order {
		n := w.nodes[id]
		if n.hung || w.now < n.isolatedUntil {
			n.hung, n.isolatedUntil = false, 0
			if n.up {
				w.fdChanged(n)
			}
		}
	}
}

// memberStates is every live member's installed view (M3).
func (w *world) memberStates() []oracle.MemberState {
	var out []oracle.MemberState
	for _, id := range w.order {
		n := w.nodes[id]
		if !n.up || n.mem == nil {
			continue
		}
		v, ok := n.mem.View()
		out = append(out, oracle.MemberState{ID: memberID(n), View: v, Installed: ok})
	}
	return out
}
