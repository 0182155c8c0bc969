package sim

import (
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Clients of replicated PHB cells (docs/REPLICATION.md "Clients"). Every
// publisher of a replicated cell is an ordered publisher, as the Go client
// is one: connected to one member of the cell (its address list is the
// cell's members), it sends its publishes in order and never retries on a
// live connection; when the connection closes (its member crashed, lost
// the leadership it served with, or closed it) it connects to the next
// member that is up and resends every unacknowledged publish, in order,
// before any new one. The oracle checks that an ordered publisher's events
// are logged in the order of its seqs (I13).
//
// What a member that does not serve does with it is the run's choice,
// drawn on its own sub-seed (raft_clients): in half the runs it forwards
// (internal/raftphb/forward) the client's publishes to the serving leader
// with its Forwarder, over the cell's simulated links and the wire codec,
// and the leader takes them with Refusals into sessions of its shell and
// answers back the same way; the Forwarder gives a client up after the
// forward timeout. In the other half it redirects: it drops the client's
// publishes and closes the connection 200 ms after it opened, as does a
// member that starts to serve (broker.standbyClient, raftEvent).

// fwdTimeout is how long a forwarded client's publishes may find no
// serving leader before its member closes it: five election timeouts, as
// the broker's default.
const fwdTimeout = 5 * raftElectionTicks * raftTick

// fwdLinger is how many Raft ticks a leader keeps the refusals of a
// member of protocol version 13 after its link went, as the broker's
// (forward.Leader.Tick). The simulated members all speak the current
// version, so none is kept by it; the leader ticks all the same.
const fwdLinger = int(2*fwdTimeout/raftTick) + 1

// fwdMember is the forwarding state of one incarnation of a cell member:
// its Forwarder, the ordered publishers connected to it, and, as the
// serving leader, the streams it takes (sessions of its shell) and those
// it refused.
type fwdMember struct {
	f       *forward.Forwarder
	clients map[shell.ClientID]*publisher
	lead    *forward.Leader
}

func (w *world) newFwdMember(n *node) *fwdMember {
	return &fwdMember{f: forward.NewForwarder(&fwdNet{w: w, n: n, inc: n.inc}, fwdTimeout),
		clients: map[shell.ClientID]*publisher{}, lead: forward.NewLeader(fwdLinger)}
}

// fwdNet is a Forwarder's way out: the cell's links, and its clients.
type fwdNet struct {
	w   *world
	n   *node
	inc int
}

func (f *fwdNet) Send(to msg.NodeID, link any, m msg.Forward) {
	if f.n.up && f.n.inc == f.inc {
		f.w.sendForward(f.n, to, link, m)
	}
}

func (f *fwdNet) ToClient(c shell.ClientID, m msg.Msg) {
	if f.n.up && f.n.inc == f.inc && f.n.raft.fwd.clients[c] != nil {
		f.w.toClient(f.n, m)
	}
}

// forwards says whether the run forwards, and n is a member of a cell.
func (w *world) forwards(n *node) bool { return w.plan.forward && n.raft != nil }

// sendForward carries a Forward from member from to member to over their
// simulated link (FIFO, lost when the link is down, stalled or reset) and
// the wire codec; link, when set, is the link epoch the stream was opened
// on.
func (w *world) sendForward(from *node, to msg.NodeID, link any, m msg.Forward) {
	l := w.byPair[pairKey(from.id, to)]
	if l == nil || !l.up || l.stalled || (link != nil && link != any(l.epoch)) {
		return
	}
	got, ok := w.viaWire(m).(msg.Forward)
	if !ok {
		panic("sim: a Forward decoded as another message")
	}
	// Spaced up to a millisecond apart, as a reader hands a burst to its
	// loop in pieces: a leader may start to serve in the middle of one.
	at := w.untrackedArrival(l, from.id, time.Duration(w.frng.IntN(1000))*time.Microsecond)
	ep, dst := l.epoch, w.nodes[to]
	w.at(at, func() {
		if l.epoch != ep || !l.up || !dst.up || dst.raft.rn == nil {
			return
		}
		w.forwardArrived(dst, from.id, got)
	})
}

// forwardArrived is member n's broker.forwardMsg: a forwarded publish or
// a stream's end (at the serving leader), or an answer or refusal for a
// client of n.
func (w *world) forwardArrived(n *node, from msg.NodeID, f msg.Forward) {
	fm := n.raft.fwd
	key := forward.Key{Peer: from, Stream: f.Client}
	switch m := f.Msg.(type) {
	case msg.Publish:
		cid, open, ok := fm.lead.Publish(key, m.Publisher, m.Seq, n.raft.serving, false, func() shell.ClientID { n.nextCID++; return n.nextCID })
		if !ok {
			w.sendForward(n, from, nil, msg.Forward{Client: f.Client, Msg: msg.Goodbye{Reason: "does not serve"}})
			return
		}
		w.fwdPublishes++
		if open {
			w.input(n, func(b *shell.Broker) { b.ClientUpReading(cid, nil, shell.Reads{AckRanges: true}) })
		}
		w.input(n, func(b *shell.Broker) { b.ClientRequest(cid, m) })
	case msg.Goodbye:
		if !forward.Ends(m.Reason) {
			fm.f.FromLeader(w.wallTime(), from, f) // the leader refused a stream of n's
			break
		}
		if cid, ok := fm.lead.End(key); ok {
			w.input(n, func(b *shell.Broker) { b.ClientDown(cid) })
			return
		}
	default:
		fm.f.FromLeader(w.wallTime(), from, f)
	}
	w.follow(n, false)
}

// wallTime is simulated true time as the time.Time a pure core takes.
func (w *world) wallTime() time.Time { return time.Time{}.Add(time.Duration(w.now)) }

// forwardedAnswer sends the serving leader's answer to a forwarded
// stream back to the member that forwards it; false if c is not one.
func (w *world) forwardedAnswer(n *node, c shell.ClientID, m msg.Msg) bool {
	if n.raft == nil || n.raft.fwd == nil {
		return false
	}
	k, ok := n.raft.fwd.lead.Stream(c)
	if !ok {
		return false
	}
	m = answerValue(m)
	w.sendForward(n, k.Peer, nil, msg.Forward{Client: k.Stream, Msg: m})
	return true
}

// follow has member n's Forwarder follow the Raft leader it knows and its
// link (on a Raft tick, retry: parked clients are resent, stalled ones
// closed).
func (w *world) follow(n *node, retry bool) {
	if !w.forwards(n) || !n.up || n.raft.rn == nil || n.raft.serving {
		return
	}
	to, link := msg.NodeID(""), any(nil)
	lead, term := n.raft.rn.Replica().Leader()
	if s := raftphb.Slot(lead); lead != 0 && int(s) <= len(n.raft.members) && n.raft.members[s-1] != n.id {
		if l := w.byPair[pairKey(n.id, n.raft.members[s-1])]; l != nil && l.up {
			to, link = n.raft.members[s-1], l.epoch
		}
	}
	for _, s := range n.raft.fwd.f.Follow(w.wallTime(), to, term, link, retry) {
		w.watchf("%s closes forwarded client %d: no serving leader for %v (%d unanswered)", n.id, s.Client, fwdTimeout, s.Unanswered)
		w.fwdGiveUps++
		if p := n.raft.fwd.clients[s.Client]; p != nil {
			p.fc.ok = false
		}
		delete(n.raft.fwd.clients, s.Client)
	}
}

// forwardServe: n starts to serve. The clients it forwarded for become
// clients of its new shell, their unanswered publishes handed to it in
// order; it takes no stream of an earlier term.
func (w *world) forwardServe(n *node) {
	fm := n.raft.fwd
	fm.lead.Serve()
	fm.closeOwn() // redirected: closed as the member's shell changes
	for _, t := range fm.f.TakeOver() {
		w.input(n, func(b *shell.Broker) {
			b.ClientUpReading(t.Client, nil, shell.Reads{AckRanges: t.Ranges})
			for _, p := range t.Publishes {
				b.ClientRequest(t.Client, p)
			}
		})
	}
	// Its own clients (connected while it served before) reconnect:
	// they were closed when it lost the leadership.
}

// forwardLost: n no longer serves. The streams it took are refused from
// now on and told (the broker's fwdConn.CloseWith); the clients it served
// directly are closed, and reconnect.
func (w *world) forwardLost(n *node) {
	fm := n.raft.fwd
	for _, k := range fm.lead.Lost() {
		w.sendForward(n, k.Peer, nil, msg.Forward{Client: k.Stream, Msg: msg.Goodbye{Reason: "no longer leads"}})
	}
	fm.closeOwn()
}

// closeOwn closes the member's clients that its Forwarder does not hold:
// those it served, or redirects.
func (fm *fwdMember) closeOwn() {
	for c, p := range fm.clients {
		if !fm.f.Has(c) {
			p.fc.ok = false
			delete(fm.clients, c)
		}
	}
}

// forwardPeerDown: n's link to cell member peer closed: the sessions of
// the streams peer forwarded go with it (its refusals stay).
func (w *world) forwardPeerDown(n *node, peer msg.NodeID) {
	if !w.forwards(n) || n.raft.fwd == nil || !n.up {
		return
	}
	for _, cid := range n.raft.fwd.lead.PeerDown(peer) { // in order: a seed replays
		w.input(n, func(b *shell.Broker) { b.ClientDown(cid) })
	}
}

// forwardRestarted: member n runs again, a new incarnation: the others
// forget what they refused of its streams (its clients are all new).
func (w *world) forwardRestarted(n *node) {
	if !w.forwards(n) {
		return
	}
	for _, id := range n.raft.members {
		if m := w.nodes[id]; id != n.id && m.up && m.raft.fwd != nil {
			m.raft.fwd.lead.PeerRestarted(n.id)
		}
	}
}

// fwdConn is an ordered publisher's connection to a member of its cell.
type fwdConn struct {
	node msg.NodeID
	inc  int
	id   shell.ClientID
	ok   bool
}

// orderedConn returns the member the ordered publisher p is connected
// to, connecting to the next one that is up (and resending every
// unacknowledged publish, in order) when its connection closed; nil when
// no member is up.
func (p *publisher) orderedConn(w *world) *node {
	if n := w.nodes[p.fc.node]; p.fc.ok && n.up && n.inc == p.fc.inc && n.raft.fwd.clients[p.fc.id] == p {
		return n
	}
	if p.fc.node != "" {
		p.at++ // as the Go client: a member whose connection closed is tried last
	}
	p.fc = fwdConn{}
	for i := range p.members {
		n := w.nodes[p.members[(p.at+i)%len(p.members)]]
		if !n.up || n.raft.rn == nil {
			continue
		}
		p.at = (p.at + i) % len(p.members)
		n.nextCID++
		p.fc = fwdConn{node: n.id, inc: n.inc, id: n.nextCID, ok: true}
		n.raft.fwd.clients[p.fc.id] = p
		ranges := p.fc.id%2 == 1
		switch {
		case n.raft.serving:
			w.input(n, func(b *shell.Broker) { b.ClientUpReading(p.fc.id, nil, shell.Reads{AckRanges: ranges}) })
		case w.plan.forward:
			n.raft.fwd.f.ClientUp(p.fc.id, ranges)
		default:
			// Redirected: closed 200 ms after it opened, its publishes
			// dropped meanwhile.
			c := p.fc
			w.after(200*time.Millisecond, func() {
				if n.up && n.inc == c.inc && n.raft.fwd.clients[c.id] == p && !n.raft.serving {
					delete(n.raft.fwd.clients, c.id)
				}
			})
		}
		w.watchf("%s connects to %s (client %d), resending %d", p.id, n.id, p.fc.id, len(p.outstanding))
		seqs := make([]uint64, 0, len(p.outstanding))
		for s := range p.outstanding {
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
		for _, s := range seqs {
			p.outstanding[s] = time.Duration(w.now)
			p.sendOrdered(w, n, p.request(s))
		}
		return n
	}
	return nil
}

// sendOrdered sends a publish over the ordered publisher's connection to
// n: to its shell if n serves, else to its Forwarder (or nowhere, when
// members redirect).
func (p *publisher) sendOrdered(w *world, n *node, req msg.Publish) {
	req, ok := w.viaWire(req).(msg.Publish)
	if !ok {
		panic("sim: a Publish decoded as another message")
	}
	if n.raft.serving {
		w.orc.AskedNoAck(req)
		id := p.fc.id
		w.input(n, func(b *shell.Broker) { b.ClientRequest(id, req) })
		return
	}
	if !w.plan.forward {
		return // redirected: dropped, resent at the next member
	}
	req.NoAck = false // as broker.forwardRequest: the Forwarder waits for every ack
	n.raft.fwd.f.Publish(p.fc.id, req)
	w.follow(n, false)
}

// answerValue is a shell's answer as a value: the shell hands PubAck and
// PubAckRange out as pointers into reused blocks, which must not travel on
// a simulated link.
func answerValue(m msg.Msg) msg.Msg {
	switch a := m.(type) {
	case *msg.PubAck:
		return *a
	case *msg.PubAckRange:
		return *a
	}
	return m
}
