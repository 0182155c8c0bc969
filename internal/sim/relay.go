package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/wire"
)

// Publishing anywhere (docs/ARCHITECTURE.md "Publishing anywhere"): in
// half the swarm runs (plan.anywhere, its own sub-seed) each pubend of a
// plain PHB also gets a publisher at an SHB of its tree, which hosts no
// pubend. The SHB relays its publishes up the tree with forward.Relay, as
// broker/relay.go does: over the simulated links and the wire codec, hop
// by hop to the PHB, which takes each relayed stream into a client
// session of its shell and answers back the same way. Such a publisher
// behaves as the Go client: it resends nothing on a live connection and
// everything unacknowledged, in order, on a new one (its SHB restarted),
// so the oracle checks its publish order (I13) besides exactly-once
// logging and acks only once durable (I9), through every fault of the
// run: the relays' resends after a link changed are deduplicated at the
// pubend.

// relayOf is n's Relay for its current incarnation (a crash loses it),
// made when first needed; nil at a member of a replicated cell (their
// pubends' publishers stay at the cell, forward.go).
func (w *world) relayOf(n *node) *forward.Relay {
	if n.raft != nil || !n.up {
		return nil
	}
	if n.relay != nil && n.relayInc == n.inc {
		return n.relay
	}
	up := map[msg.PubendID]msg.NodeID{}
	members := map[msg.NodeID][]msg.NodeID{}
	for _, r := range n.routes {
		if r.Up != "" {
			up[r.Pubend] = r.Up
			members[r.Up] = w.plan.topo.members(r.Up)
		}
	}
	n.relay = forward.NewRelay(n.id, n.broker.Pubends, up, members, &relayNet{w: w, n: n, inc: n.inc}, forward.RelayTimeout)
	n.relayInc = n.inc
	if n.relay.Active() {
		inc := n.inc
		w.after(forward.RelayRetry, func() { w.relayLoop(n, inc) })
	}
	return n.relay
}

// relayLoop resends, every forward.RelayRetry of an incarnation, what
// was refused upstream, and gives up the clients stalled for the timeout.
func (w *world) relayLoop(n *node, inc int) {
	if !n.up || n.inc != inc {
		return
	}
	w.relayFollow(n, true)
	w.after(forward.RelayRetry, func() { w.relayLoop(n, inc) })
}

// relayNet is a Relay's way out: n's simulated links and its clients.
type relayNet struct {
	w   *world
	n   *node
	inc int
}

func (r *relayNet) live() bool { return r.n.up && r.n.inc == r.inc }

func (r *relayNet) Send(to msg.NodeID, link any, m msg.Forward) {
	if r.live() {
		r.w.sendRelay(r.n, to, link, m)
	}
}

func (r *relayNet) Link(to msg.NodeID) (any, uint16, bool) {
	id, ok := r.w.relayLink(r.n, to)
	if !r.live() || !ok {
		return nil, 0, false
	}
	return id, wire.Version, true
}

// relayLink identifies n's connection to neighbour to, as the broker's
// *transport.Conn does: a link epoch and the peer's incarnation (a
// restarted peer is a new connection, though a crash leaves the link up
// in the simulator). ok false: no connection (a stalled link is one, as a
// connection that stalls looks up).
func (w *world) relayLink(n *node, to msg.NodeID) (any, bool) {
	l, peer := w.byPair[pairKey(n.id, to)], w.nodes[to]
	if l == nil || !l.up || !peer.up {
		return nil, false
	}
	return [2]int{l.epoch, peer.inc}, true
}

// ToClient answers a client of n: a relayed stream's, back down its link;
// a publisher's, as its connection would.
func (r *relayNet) ToClient(c shell.ClientID, m msg.Msg) {
	if !r.live() {
		return
	}
	if k, ok := r.n.relay.Stream(c); ok {
		r.w.sendRelay(r.n, k.Peer, nil, msg.Forward{Client: k.Stream, Msg: m})
		return
	}
	r.w.toClient(r.n, r.w.viaWire(m))
}

// sendRelay carries a Forward from n to neighbour to over their simulated
// link (FIFO, lost when the link is down, stalled or reset) and the wire
// codec; link, when set, is the link epoch the stream was opened on.
func (w *world) sendRelay(n *node, to msg.NodeID, link any, m msg.Forward) {
	l := w.byPair[pairKey(n.id, to)]
	id, ok := w.relayLink(n, to)
	if !ok || l.stalled || (link != nil && link != id) {
		return
	}
	got, ok := w.viaWire(m).(msg.Forward)
	if !ok {
		panic("sim: a Forward decoded as another message")
	}
	at := w.untrackedArrival(l, n.id, 0)
	ep, dst, inc := l.epoch, w.nodes[to], w.nodes[to].inc
	w.watchf("relay send %s→%s (link %d) %v", n.id, to, ep, got)
	w.at(at, func() {
		if l.epoch != ep || !l.up || !dst.up || dst.inc != inc {
			w.watchf("relay lost %s→%s (link %d) %v", n.id, to, ep, got)
			return
		}
		w.relayArrived(dst, n.id, got)
	})
}

// relayArrived is n's broker.relayMsg: a relayed publish or a stream's
// end from downstream, or an answer from upstream.
func (w *world) relayArrived(n *node, from msg.NodeID, f msg.Forward) {
	r := w.relayOf(n)
	if r == nil {
		panic(fmt.Sprintf("sim: %s, a member of a replicated cell, got a relayed %v from %s", n.id, f, from))
	}
	l := w.byPair[pairKey(n.id, from)]
	in, err := r.FromPeer(w.wallTime(), from, l.a == n.id && l.b == from, f, func() shell.ClientID { n.nextCID++; return n.nextCID })
	if err != nil {
		panic(fmt.Sprintf("sim: %s: %v", n.id, err))
	}
	switch {
	case in.Ended != 0:
		w.relayClientDown(n, in.Ended)
	case in.Publish != nil:
		w.relayPublishes++
		if in.Open {
			// A client of n like any other, its permissions checked
			// where it is connected; it reads ranges (its broker splits).
			w.input(n, func(b *shell.Broker) { b.ClientUpReading(in.Client, nil, shell.Reads{AckRanges: true}) })
			r.ClientUp(in.Client, nil, true)
		}
		p := *in.Publish
		if !r.Publish(w.wallTime(), in.Client, p) {
			w.input(n, func(b *shell.Broker) { b.ClientRequest(in.Client, p) })
		}
	}
}

// relayedAnswer sends the shell's answer to a relayed stream's session
// back down the stream's link; false if c is not one.
func (w *world) relayedAnswer(n *node, c shell.ClientID, m msg.Msg) bool {
	r := w.relayOf(n)
	if r == nil {
		return false
	}
	k, ok := r.Stream(c)
	if !ok {
		return false
	}
	m = answerValue(m)
	w.sendRelay(n, k.Peer, nil, msg.Forward{Client: k.Stream, Msg: m})
	return true
}

// relayRequest relays a request of client id of n whose pubend n does not
// host (as broker.relayRequest); false: it is for n's shell.
func (w *world) relayRequest(n *node, id shell.ClientID, m msg.Msg) bool {
	r := w.relayOf(n)
	if r == nil || !r.Active() {
		return false
	}
	var ps []msg.Publish
	switch m := m.(type) {
	case msg.Publish:
		ps = []msg.Publish{m}
	case *msg.PublishRun:
		ps = m.Publishes
	default:
		return false
	}
	if !slices.ContainsFunc(ps, r.Relays) {
		return false
	}
	for _, p := range ps {
		if !r.Publish(w.wallTime(), id, p) {
			w.input(n, func(b *shell.Broker) { b.ClientRequest(id, p) })
		}
	}
	return true
}

// relayClientDown: client c of n is gone (its stream ended, its link
// went, or it was given up).
func (w *world) relayClientDown(n *node, c shell.ClientID) {
	w.input(n, func(b *shell.Broker) { b.ClientDown(c) })
	if r := w.relayOf(n); r != nil {
		r.ClientDown(c)
	}
}

// relayFollow has n's Relay follow its links upstream; a client given up
// for want of one is closed: a publisher reconnects and resends, a
// relayed stream is refused back to its broker, which resends in a new one.
func (w *world) relayFollow(n *node, retry bool) {
	r := w.relayOf(n)
	if r == nil || !r.Active() {
		return
	}
	for _, s := range r.Follow(w.wallTime(), retry) {
		w.watchf("%s gives up relayed client %d: no link upstream for %v (%d unanswered)", n.id, s.Client, forward.RelayTimeout, s.Unanswered)
		w.relayGiveUps++
		if k, ok := r.Stream(s.Client); ok {
			w.sendRelay(n, k.Peer, nil, msg.Forward{Client: k.Stream, Msg: msg.Goodbye{Reason: "no link upstream"}})
		}
		for _, p := range w.pubs {
			if p.conn.ok && p.conn.node == n.id && p.conn.gen == n.gen && p.conn.id == s.Client {
				p.conn.ok = false
			}
		}
		w.relayClientDown(n, s.Client)
	}
}

// relayLinkDown: n's link to peer went; the streams peer relayed to n end
// with it, and n's own relayed publishes go on the next link.
func (w *world) relayLinkDown(n *node, peer msg.NodeID) {
	r := w.relayOf(n)
	if r == nil {
		return
	}
	for _, c := range r.PeerDown(peer) {
		w.relayClientDown(n, c)
	}
	w.relayFollow(n, false)
}

// anywherePublishers adds, for each pubend of a plain PHB, a publisher at
// an SHB of its tree whose path up passes no replicated cell.
func (w *world) anywherePublishers(rng *rand.Rand) {
	routes := w.plan.topo.Routes()
	for _, b := range w.plan.topo.Brokers {
		if b.Role != PHB || w.replicas(b) != nil {
			continue
		}
		for _, pe := range b.Pubends {
			var at []msg.NodeID
			for _, s := range w.plan.topo.Brokers {
				if s.Role == SHB && w.relaysTo(s.ID, pe, routes) {
					at = append(at, s.ID)
				}
			}
			if len(at) == 0 {
				continue
			}
			shb := at[rng.IntN(len(at))]
			pub := &publisher{id: fmt.Sprintf("pub-%s-at-%s", pe, shb), node: shb, pubend: pe,
				outstanding: map[uint64]time.Duration{}, rate: float64(1 + rng.IntN(50)), inOrder: true}
			w.orc.Ordered(pub.id)
			w.pubs = append(w.pubs, pub)
			w.after(time.Duration(rng.IntN(2000))*time.Millisecond, func() { pub.run(w) })
			w.after(time.Second, func() { pub.retry(w) })
		}
	}
}

// relaysTo says whether broker id lies in pubend pe's tree below its PHB
// with no member of a replicated cell on any path up.
func (w *world) relaysTo(id msg.NodeID, pe msg.PubendID, routes map[msg.NodeID][]gd.Route) bool {
	i := slices.IndexFunc(routes[id], func(r gd.Route) bool { return r.Pubend == pe })
	if i < 0 || w.nodes[id].raft != nil {
		return false
	}
	up := routes[id][i].Up
	if up == "" {
		return true // the PHB
	}
	for _, m := range w.plan.topo.members(up) {
		if !w.relaysTo(m, pe, routes) {
			return false
		}
	}
	return true
}
