package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Durable subscribers (Gryphon DS, DSN 2003 §2, §4; MODEL.md I6). Each
// keeps its checkpoint token — the last SubStarted, Delivery, Gap or
// Progress position per pubend — goes away (unsubscribes or hangs up) and
// comes back with it, at the same SHB or another (reconnect anywhere), and
// loses its session when its SHB crashes. Every SHB it has had a session
// at keeps its release floor at the checkpoint (what the durable layer
// does with the subscriber's acknowledgements; the old SHBs stand for
// registries that learn of its acknowledgements elsewhere), so the pubends
// keep what it has not consumed unless max_retain releases it early — then
// it gets a gap. The oracle checks its sessions as one stream
// from its first token (oracle/durable.go).
//
// They draw from their own sub-seed, so earlier seeds replay unchanged. In
// runs where SHBs drive random release floors of their own (release.go),
// those floors stand in for the subscribers' acknowledgements: they may
// release past a checkpoint, and the subscriber then gets a gap.
type durableSub struct {
	name     string
	pattern  string
	selector string
	node     msg.NodeID // the SHB of the current (or last) session
	// homes: the SHBs it has had sessions at. Each holds its release
	// floor at the checkpoint: an SHB it moves to may have released past
	// the checkpoint already (a floor cannot pull that back), so the old
	// ones must keep holding until it has caught up there.
	homes   map[msg.NodeID]bool
	n       int
	cur     msg.SubID
	active  bool
	started bool
	from    msg.Token                  // checkpoint presented by the current session
	ckpt    msg.Token                  // checkpoint: nil until the first SubStarted
	conns   map[msg.NodeID]*clientConn // one per SHB it used
}

// conn returns the subscriber's connection to SHB id (a clientConn knows
// its broker's incarnation, not the broker).
func (d *durableSub) conn(id msg.NodeID) *clientConn {
	if d.conns == nil {
		d.conns = map[msg.NodeID]*clientConn{}
	}
	if d.conns[id] == nil {
		d.conns[id] = &clientConn{}
	}
	return d.conns[id]
}

func (w *world) scheduleDurables(shbs []msg.NodeID) {
	r := rand.New(rand.NewPCG(w.opts.Seed, 0x64757261626c65)) // "durable"
	if w.opts.Scenario != "" || len(shbs) == 0 || r.IntN(2) == 0 {
		return
	}
	w.drng = r
	for i := range 1 + r.IntN(4) {
		d := &durableSub{name: fmt.Sprintf("d%d", i), node: shbs[r.IntN(len(shbs))], pattern: patterns[r.IntN(len(patterns))]}
		if r.IntN(2) == 0 {
			d.selector = selectors[r.IntN(len(selectors))]
		}
		w.durables = append(w.durables, d)
		w.after(time.Duration(r.Int64N(int64(w.opts.FaultPhase/3))), func() { d.start(w) })
		w.after(time.Duration(2000+r.IntN(6000))*time.Millisecond, func() { d.away(w) })
	}
	if w.floors == nil {
		w.after(500*time.Millisecond, w.durableFloors)
	}
}

func (d *durableSub) start(w *world) {
	n := w.nodes[d.node]
	if d.active {
		return
	}
	if !n.up {
		// Its SHB is down: try another one.
		w.after(time.Duration(200+w.drng.IntN(800))*time.Millisecond, func() { d.moveAndStart(w) })
		return
	}
	d.n++
	d.cur = msg.SubID(fmt.Sprintf("%s/%s.%d", d.node, d.name, d.n))
	d.active, d.started = true, false
	d.from = maps(d.ckpt)
	n.durables = append(n.durables, d)
	w.watchf("subscribe durable %s %s %s from %v", d.cur, d.pattern, d.selector, d.from)
	// The new SHB holds the checkpoint from now on.
	w.durableFloorsAt(n)
	d.conn(d.node).request(w, n, msg.Subscribe{Sub: d.cur, Pattern: d.pattern, Selector: d.selector, Durable: true, From: d.from})
}

func maps(t msg.Token) msg.Token {
	if t == nil {
		return nil
	}
	c := msg.Token{}
	for p, v := range t {
		c[p] = v
	}
	return c
}

// moveAndStart picks an SHB (the same one half the time) and subscribes.
func (d *durableSub) moveAndStart(w *world) {
	if w.drng.IntN(2) == 0 {
		var up []msg.NodeID
		for _, id := range w.order {
			if n := w.nodes[id]; n.broker.Role == SHB && n.up {
				up = append(up, id)
			}
		}
		if len(up) > 0 {
			d.node = up[w.drng.IntN(len(up))]
		}
	}
	d.start(w)
}

// away ends the session for a while (until the network heals).
func (d *durableSub) away(w *world) {
	if w.healed {
		return
	}
	n := w.nodes[d.node]
	if d.active && n.up {
		if d.n%2 == 0 {
			d.conn(d.node).close(w, n)
		} else {
			d.conn(d.node).request(w, n, msg.Unsubscribe{Sub: d.cur})
		}
		d.lost(w)
		w.after(time.Duration(300+w.drng.IntN(6000))*time.Millisecond, func() { d.moveAndStart(w) })
	}
	w.after(time.Duration(2000+w.drng.IntN(8000))*time.Millisecond, func() { d.away(w) })
}

func (d *durableSub) lost(w *world) {
	if d.active && d.started {
		w.orc.Ended(d.cur)
	}
	d.active = false
	n := w.nodes[d.node]
	n.durables = slices.DeleteFunc(n.durables, func(x *durableSub) bool { return x == d })
}

// crashed: its SHB crashed; it comes back after a while, anywhere.
func (d *durableSub) crashed(w *world) {
	d.lost(w)
	w.after(time.Duration(300+w.drng.IntN(3000))*time.Millisecond, func() { d.moveAndStart(w) })
}

// durableFloors sets, about twice a second, every SHB's release floor to
// the minimum checkpoint of the durable subscribers it holds (it is one of
// their homes, or they are starting a session there), and clears it where
// none: the acknowledgements of subscribers that consume at once.
// Floors are the engine's soft state, so this also restores them after a
// restart.
func (w *world) durableFloors() {
	for _, id := range w.order {
		if n := w.nodes[id]; !n.hung {
			w.durableFloorsAt(n)
		}
	}
	w.after(time.Duration(300+w.drng.IntN(400))*time.Millisecond, w.durableFloors)
}

// durableFloorsAt sets SHB n's floors now; also right after a restart,
// before its first ack, as the durable layer restores them from disk.
func (w *world) durableFloorsAt(n *node) {
	id := n.id
	if w.floors != nil || w.drng == nil || n.broker.Role != SHB || !n.up {
		return
	}
	{
		var min msg.Token
		for _, d := range w.durables {
			// Its home, or the SHB it is starting a session at.
			if d.ckpt == nil || (!d.homes[id] && !(d.active && d.node == id)) {
				continue
			}
			if min == nil {
				min = maps(d.ckpt)
				continue
			}
			for p, t := range d.ckpt {
				if m, ok := min[p]; !ok || t < m {
					min[p] = t
				}
			}
		}
		if min != nil {
			w.setFloors(n, min)
			return
		}
		for _, st := range n.eng.ReleaseStates() {
			if st.FloorSet { // nobody holds it here any more
				in := gd.ReleaseFloor{Pubend: st.Pubend, Clear: true}
				w.input(n, func(b *shell.Broker) { b.ReleaseFloor(in) })
			}
		}
	}
}

func (w *world) setFloors(n *node, tok msg.Token) {
	if !n.up {
		return
	}
	for _, r := range n.routes {
		if t, ok := tok[r.Pubend]; ok {
			in := gd.ReleaseFloor{Pubend: r.Pubend, T: t}
			w.input(n, func(b *shell.Broker) { b.ReleaseFloor(in) })
		}
	}
}

// durableMsg handles a client message for a durable subscriber's session;
// false when m is for no such session.
func (w *world) durableMsg(n *node, m msg.Msg) bool {
	var id msg.SubID
	switch m := m.(type) {
	case msg.Delivery:
		id = m.Sub
	case msg.SubStarted:
		id = m.Sub
	case msg.Gap:
		id = m.Sub
	case msg.Progress:
		id = m.Sub
	default:
		return false
	}
	var d *durableSub
	for _, x := range n.durables {
		if x.cur == id {
			d = x
		}
	}
	if d == nil {
		return false
	}
	switch m := m.(type) {
	case msg.SubStarted:
		w.watchf("started %v", m)
		d.started = true
		w.orc.DurableStarted(m.Sub, n.id, d.pattern, d.selector, d.from, m.Token)
		if d.ckpt == nil {
			d.ckpt = msg.Token{}
		}
		for p, t := range m.Token {
			d.ckpt[p] = max(d.ckpt[p], t)
		}
		if d.homes == nil {
			d.homes = map[msg.NodeID]bool{}
		}
		d.homes[n.id] = true
		w.durableFloorsAt(n) // acknowledged at once: the floor holds from the start
	case msg.Delivery:
		w.orc.Delivered(m.Sub, m.Event)
		d.ckpt[m.Event.Pubend] = max(d.ckpt[m.Event.Pubend], m.Event.Tick)
	case msg.Gap:
		w.watchf("gap %v", m)
		w.noteFinals()
		lost := w.orc.GapLoses(m.Sub, m) // before Gap moves the session on
		w.orc.Gap(m.Sub, m)
		w.gaps++
		if lost != nil && w.plan.maxRetain == 0 && w.floors == nil {
			// Early release off and every floor kept at the checkpoints:
			// nothing a durable subscriber needs is ever released. (A gap
			// may still cover released events it does not want: the
			// pubend cannot tell, their values are gone.)
			w.orc.Violate("I6", "%s got %v with early release off and lost %v", m.Sub, m, lost)
		}
		d.ckpt[m.Pubend] = max(d.ckpt[m.Pubend], m.To)
	case msg.Progress:
		w.orc.Progress(m.Sub, m.Token)
		for p, t := range m.Token {
			d.ckpt[p] = max(d.ckpt[p], t)
		}
	}
	return true
}

// noteFinals shows the oracle every live pubend's L prefix (a gap may come
// from a pubend hosted at the subscriber's own broker, before the step's
// release check ran).
func (w *world) noteFinals() {
	for _, id := range w.order {
		if n := w.nodes[id]; n.up && n.broker.Role == PHB {
			for _, st := range n.eng.ReleaseStates() {
				if st.Hosted {
					w.orc.NoteFinal(st.Pubend, st.Final)
				}
			}
		}
	}
}

// durablesHealed brings every durable subscriber back once faults stop, so
// that the final checks see all of them caught up.
func (w *world) durablesHealed() {
	for _, d := range w.durables {
		if !d.active {
			d.moveAndStart(w)
		}
	}
}
