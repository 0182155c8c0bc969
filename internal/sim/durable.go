package sim

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Durable subscribers (Gryphon DS, DSN 2003 §2, §4; docs/CONCEPTS.md I6). Each
// keeps its checkpoint token — the last SubStarted, Delivery, Gap or
// Progress position per pubend — goes away (unsubscribes or hangs up) and
// comes back with it, at the same SHB or another (reconnect anywhere), and
// loses its session when its SHB crashes. It acknowledges its checkpoint
// (msg.SubAck) as it consumes, and the SHB's durable subscription state
// (internal/shell/durable.go, kept on the SHB's crashable disk) turns the
// acknowledgements into release floors. An SHB it left keeps it, away, at
// its last acknowledgement there, so the pubends keep what it has not
// consumed unless max_retain releases it early — then it gets a gap. Once
// faults stop it deletes itself at the SHBs it left. The oracle checks its
// sessions as one stream from its first token (oracle/durable.go).
//
// They draw from their own sub-seed, so earlier seeds replay unchanged;
// runs where SHBs drive random release floors of their own (release.go)
// have none, since both would set the same floors.
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
	// scripted: an experiment (ds.go) decides when it comes back after
	// its SHB crashed, not the swarm's random retry.
	scripted bool
	// On a paced connection (clientConn.paced) it reports what it has
	// taken as the client library does (msg.SubConsumed), but every
	// reportEvery events or msg.ConsumedBytes bytes: rate events a
	// second (0: each at once, as delivered), the ones delivered and not
	// yet taken in untaken, its position taken, and untold, untoldBytes
	// since its last report. A slow one makes its SHB pace its catch-up
	// (gd/durable.go).
	rate                int
	untaken             []*msg.Event
	taken               msg.Token
	untold, untoldBytes int
	taking              msg.SubID // the session whose taking is scheduled
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
	if w.opts.Scenario != "" || len(shbs) == 0 || w.floors != nil {
		return
	}
	// Every run without floors of its own has some. (The first draw of a
	// PCG seeded like the plan's follows the plan's own first draw, which
	// decided the floors: skip it.)
	r.Uint64()
	w.drng = r
	for i := range 1 + r.IntN(4) {
		d := &durableSub{name: fmt.Sprintf("d%d", i), node: shbs[r.IntN(len(shbs))], pattern: patterns[r.IntN(len(patterns))]}
		if i%2 == 1 {
			d.rate = slowTaker // no draw: the seeds' other choices stay as they were
		}
		if r.IntN(2) == 0 {
			d.selector = selectors[r.IntN(len(selectors))]
		}
		w.durables = append(w.durables, d)
		w.after(time.Duration(r.Int64N(int64(w.opts.FaultPhase/3))), func() { d.start(w) })
		w.after(time.Duration(2000+r.IntN(6000))*time.Millisecond, func() { d.away(w) })
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
	d.from = maps.Clone(d.ckpt)
	d.untaken, d.taken, d.untold, d.untoldBytes = nil, msg.Token{}, 0, 0 // a new session: a new window
	n.durables = append(n.durables, d)
	if d.homes == nil {
		d.homes = map[msg.NodeID]bool{}
	}
	d.homes[d.node] = true // the SHB keeps it from the request on
	w.watchf("subscribe durable %s %s %s from %v", d.cur, d.pattern, d.selector, d.from)
	d.conn(d.node).request(w, n, msg.Subscribe{Sub: msg.SubID(d.name), Pattern: d.pattern, Selector: d.selector, Durable: true, From: d.from})
}

// moveAndStart picks an SHB (the same one half the time) and subscribes.
func (d *durableSub) moveAndStart(w *world) {
	if d.active {
		return // back already (a retry scheduled before it returned)
	}
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
		// Hanging up keeps it at the SHB, away; an unsubscribe would end
		// it for good.
		d.conn(d.node).close(w, n)
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
	if d.scripted {
		return
	}
	w.after(time.Duration(300+w.drng.IntN(3000))*time.Millisecond, func() { d.moveAndStart(w) })
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
		if msg.SubID(x.name) == id {
			d = x
		}
	}
	if d == nil {
		return false
	}
	// The oracle knows each session by its own id.
	switch x := m.(type) {
	case msg.Delivery:
		x.Sub, m = d.cur, x
	case msg.SubStarted:
		x.Sub, m = d.cur, x
	case msg.Gap:
		x.Sub, m = d.cur, x
	case msg.Progress:
		x.Sub, m = d.cur, x
	}
	defer d.ack(w, n)
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
	case msg.Delivery:
		w.orc.Delivered(m.Sub, m.Event)
		d.ckpt[m.Event.Pubend] = max(d.ckpt[m.Event.Pubend], m.Event.Tick)
		w.ds.moved(w, d, true)
		if d.conn(n.id).paced {
			d.handed(w, n, m.Event)
		}
	case msg.Gap:
		w.watchf("gap %v", m)
		w.noteFinals()
		lost := w.orc.GapLoses(m.Sub, m) // before Gap moves the session on
		w.orc.Gap(m.Sub, m)
		w.gaps++
		if lost != nil && w.plan.maxRetain == 0 && w.plan.maxRetainBytes == 0 && w.floors == nil {
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
		w.ds.moved(w, d, false)
	}
	return true
}

// slowTaker is how many events a second a slow durable subscriber takes:
// fewer than the swarm's publishers send it, so that its catch-ups fill
// their windows (gd.MinCatchupWindowEvents in the simulator).
const slowTaker = 50

// handed: ev was delivered on a paced connection; it is taken at once, or
// at the subscriber's rate.
func (d *durableSub) handed(w *world, n *node, ev *msg.Event) {
	d.untaken = append(d.untaken, ev)
	if d.rate == 0 {
		d.take(w, n, len(d.untaken))
		return
	}
	if d.taking != d.cur {
		d.taking = d.cur
		cur := d.cur
		w.after(time.Second/time.Duration(d.rate), func() { d.takeSome(w, n, cur) })
	}
}

// takeSome takes one event, and comes back at the subscriber's rate while
// some are left, as long as the session lasts.
func (d *durableSub) takeSome(w *world, n *node, cur msg.SubID) {
	if !d.active || d.cur != cur {
		return // another session schedules its own
	}
	d.take(w, n, 1)
	if len(d.untaken) == 0 {
		d.taking = ""
		return
	}
	w.after(time.Second/time.Duration(d.rate), func() { d.takeSome(w, n, cur) })
}

// reportEvery: a simulated client reports what it has taken every this
// many events (the client library, every msg.ConsumedEvery): with the
// swarm's few events, a window of msg.ConsumedEvery would never fill.
const reportEvery = 4

// take takes k events and reports, as the client library does, once
// reportEvery events or msg.ConsumedBytes bytes are unreported.
func (d *durableSub) take(w *world, n *node, k int) {
	for _, ev := range d.untaken[:min(k, len(d.untaken))] {
		d.taken[ev.Pubend] = max(d.taken[ev.Pubend], ev.Tick)
		d.untold++
		d.untoldBytes += ev.Size()
	}
	d.untaken = d.untaken[min(k, len(d.untaken)):]
	if d.untold < reportEvery && d.untoldBytes < msg.ConsumedBytes {
		return
	}
	d.untold, d.untoldBytes = 0, 0
	tok, cur, inc := maps.Clone(d.taken), d.cur, n.inc
	w.after(time.Millisecond, func() { // a client's reaction, after the broker's step
		if d.active && d.cur == cur && d.node == n.id && n.up && n.inc == inc {
			d.conn(n.id).request(w, n, msg.SubConsumed{Sub: msg.SubID(d.name), Token: tok})
		}
	})
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

// ack acknowledges the checkpoint at the subscriber's SHB, a moment later
// (a client's reaction; and the broker is in the middle of a step now).
func (d *durableSub) ack(w *world, n *node) {
	if d.ckpt == nil {
		return
	}
	tok, cur, inc := maps.Clone(d.ckpt), d.cur, n.inc
	w.after(time.Millisecond, func() {
		if d.active && d.cur == cur && d.node == n.id && n.up && n.inc == inc {
			d.conn(n.id).request(w, n, msg.SubAck{Sub: msg.SubID(d.name), Token: tok})
		}
	})
}

// durablesHealed brings every durable subscriber back once faults stop, so
// that the final checks see all of them caught up, and deletes each at the
// SHBs it left, where it would hold its last acknowledgement for ever.
func (w *world) durablesHealed() {
	for _, d := range w.durables {
		if !d.active {
			d.moveAndStart(w)
		}
	}
	// Only once they have caught up where they are: until then the SHBs
	// they left must keep holding (a floor at the new SHB cannot pull back
	// what the network already released on the old one's word).
	w.after(20*time.Second, w.durablesLeave)
}

// durablesLeave deletes every durable subscriber that is back at the SHBs
// it left, and does so again every half second until the run ends (an SHB down now restores it
// from its disk later; a subscriber still moving leaves another).
func (w *world) durablesLeave() {
	for _, d := range w.durables {
		if !d.active || !d.started {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(d.homes)) {
			n := w.nodes[id]
			if id == d.node || !n.up || n.hung {
				continue
			}
			attached, held := n.sh.Durables()[d.name]
			switch {
			case !held:
				delete(d.homes, id) // gone (and its deletion durable: no crashes now)
			case !attached:
				c := &clientConn{}
				c.request(w, n, msg.Unsubscribe{Sub: msg.SubID(d.name)})
				c.close(w, n)
			default:
				w.orc.Violate("I6", "%s is attached at %s while its subscriber is at %s", d.name, id, d.node)
			}
		}
	}
	w.after(500*time.Millisecond, w.durablesLeave)
}
