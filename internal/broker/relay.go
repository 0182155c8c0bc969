package broker

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/wire"
)

// Publishing anywhere (docs/ARCHITECTURE.md "Publishing anywhere"): a
// client (aerie or MQTT) may publish at a broker that does not host the
// pubend. The broker relays each such publish one hop up the pubend's
// tree, to a member of its upstream cell, over the link the tree's acks
// already travel, in a msg.Forward; the broker there does the same, as
// for a client of its own, until a broker hosting the pubend takes it
// into a client session of its shell. Its answer (the PubAck after the
// fsync, or a PubReject with its reason) comes back hop by hop, and only
// then does the client hear of it. Each hop is the pair of pure machines
// a replicated PHB cell forwards with (internal/raftphb/forward;
// docs/REPLICATION.md "Clients"): a forward.Forwarder per upstream cell
// keeps every publish until it is answered and resends the unanswered
// ones, in order and in a new stream, when the link or the member it
// goes to changes; a forward.Leader keeps the streams that downstream
// neighbours relay here, each a client of this broker. A retry is
// harmless: the pubend deduplicates by publisher and sequence number, as
// for a client's own retry after a reconnect.

// relayTimeout bounds how long a client's relayed publishes may find no
// link towards their pubend before the client is closed with a reason
// (it may reconnect elsewhere and resend).
const relayTimeout = 30 * time.Second

// relayRetry is how often relayed publishes that were refused upstream
// are sent again (to the next member of the upstream cell).
const relayRetry = 200 * time.Millisecond

var errNoUpstream = errors.New("broker: no link towards the pubend to relay publishes on")

// relayState is a broker's relaying: loop-owned.
type relayState struct {
	// up maps each pubend this broker does not host, but lies in the
	// tree of, to its upstream cell; reach lists those pubends, sorted.
	up    map[msg.PubendID]msg.NodeID
	reach []msg.PubendID
	// members lists each upstream cell's brokers, sorted; cellOf is the
	// reverse.
	members map[msg.NodeID][]msg.NodeID
	cellOf  map[msg.NodeID]msg.NodeID
	// fwd relays the clients' publishes to each upstream cell; skip
	// counts the refusals from its members, so the next member is tried.
	fwd  map[msg.NodeID]*forward.Forwarder
	skip map[msg.NodeID]int
	// perms: what each client's user may publish (nil: everything, and
	// for the streams relayed from downstream: checked where the client
	// is connected).
	perms map[shell.ClientID]*auth.Perms
	// in holds the streams downstream neighbours relay here.
	in *forward.Leader
	// relayed counts the publishes this broker relayed up; taken the
	// relayed publishes it took from downstream.
	relayed, taken uint64
}

func newRelay(routes []gd.Route, members func(msg.NodeID) []msg.NodeID) *relayState {
	r := &relayState{up: map[msg.PubendID]msg.NodeID{}, members: map[msg.NodeID][]msg.NodeID{},
		cellOf: map[msg.NodeID]msg.NodeID{}, fwd: map[msg.NodeID]*forward.Forwarder{}, skip: map[msg.NodeID]int{},
		perms: map[shell.ClientID]*auth.Perms{}, in: forward.NewLeader()}
	for _, rt := range routes {
		if rt.Up == "" {
			continue
		}
		r.up[rt.Pubend] = rt.Up
		r.reach = append(r.reach, rt.Pubend)
		if _, ok := r.members[rt.Up]; !ok {
			ms := slices.Sorted(slices.Values(members(rt.Up)))
			r.members[rt.Up] = ms
			for _, m := range ms {
				r.cellOf[m] = rt.Up
			}
		}
	}
	slices.Sort(r.reach)
	return r
}

// pick is the pubend of a publisher's publishes that name none, at a
// broker that hosts no pubend: one of those reachable upstream, by a hash
// of the publisher, as a PHB picks among those it hosts
// (shell.Broker's pickPubend), so all of them go to one pubend and stay
// in order.
func (r *relayState) pick(publisher string) msg.PubendID {
	if len(r.reach) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(publisher))
	return r.reach[int(h.Sum32()%uint32(len(r.reach)))]
}

// mqttPubends are the pubends the MQTT listener's publishes go to: those
// hosted here, else those reachable upstream.
func (n *Node) mqttPubends() []msg.PubendID {
	if len(n.hosted) > 0 {
		return n.hosted
	}
	return n.relay.reach
}

// relayClientUp: client cid may publish what perms allows.
func (n *Node) relayClientUp(cid shell.ClientID, perms *auth.Perms) {
	if len(n.relay.up) > 0 {
		n.relay.perms[cid] = perms
	}
}

// relayClientDown: client cid is gone; the brokers upstream free its
// streams.
func (n *Node) relayClientDown(cid shell.ClientID) {
	r := n.relay
	if len(r.up) == 0 {
		return
	}
	delete(r.perms, cid)
	for _, f := range r.fwd {
		f.ClientDown(cid)
	}
}

// relayRequest relays client cid's publishes whose pubend is not hosted
// here, or refuses them; false: m is for this broker's shell (or its
// cell's leader).
func (n *Node) relayRequest(cid shell.ClientID, m msg.Msg) bool {
	if len(n.relay.up) == 0 {
		return false // every pubend in reach is hosted here
	}
	switch m := m.(type) {
	case msg.Publish:
		return n.relayPublish(cid, m)
	case *msg.PublishRun:
		if !slices.ContainsFunc(m.Publishes, func(p msg.Publish) bool { return n.relays(p) }) {
			return false
		}
		// Piece by piece: each publish is relayed (or taken here) on its own.
		for i := range m.Publishes {
			if p := m.Publishes[i]; !n.relayPublish(cid, p) {
				n.hostedRequest(cid, p)
			}
		}
		return true
	}
	return false
}

// relays says whether publish p is not for this broker's own pubends.
func (n *Node) relays(p msg.Publish) bool {
	if p.Pubend == "" {
		return len(n.hosted) == 0
	}
	_, ok := slices.BinarySearch(n.hosted, p.Pubend)
	return !ok
}

// hostedRequest hands a request of client cid to this broker's shell, or
// to its cell's serving leader.
func (n *Node) hostedRequest(cid shell.ClientID, m msg.Msg) {
	if n.raft != nil && !n.raft.serving {
		if n.forwards() {
			n.forwardRequest(cid, m)
		}
		return
	}
	n.sh.ClientRequest(cid, m)
}

// relayPublish relays publish p of client cid up its pubend's tree, or
// refuses it with the reason; false: its pubend is hosted here.
func (n *Node) relayPublish(cid shell.ClientID, p msg.Publish) bool {
	if !n.relays(p) {
		return false
	}
	r := n.relay
	conn := n.clients[cid]
	if conn == nil {
		return true // a closed connection's leftovers
	}
	if p.Pubend == "" {
		p.Pubend = r.pick(p.Publisher)
	}
	cell, ok := r.up[p.Pubend]
	if !ok {
		conn.Send(msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: fmt.Sprintf(
			"pubend %q is unknown at broker %s: it is not hosted here, and no pubend of that name has this broker in its tree", p.Pubend, n.opts.ID)})
		return true
	}
	// Checked here, where the client is connected (shell/session.go): the
	// brokers upstream trust their downstream neighbour.
	if !r.perms[cid].MayPublish(p.Topic) {
		conn.Send(msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: "not authorized to publish to " + p.Topic})
		return true
	}
	f := r.fwd[cell]
	if f == nil {
		f = forward.NewForwarder(fwdNet{n}, relayTimeout)
		r.fwd[cell] = f
	}
	if !f.Has(cid) {
		if to, old := n.relayTarget(cell); to == "" && old != nil {
			conn.Send(msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: fmt.Sprintf(
				"broker %s cannot relay to pubend %q: its upstream broker %s speaks protocol version %d, and relaying publishes needs %d; publish at the pubend's PHB",
				n.opts.ID, p.Pubend, old.Peer.ID, old.Peer.Version, wire.VersionRelay)})
			return true
		}
		f.ClientUp(cid, clientReads(conn).AckRanges)
		n.relayFollow(cell, f, false)
	}
	// The Forwarder keeps a publish until its pubend acks it, so a relayed
	// publish asks for its ack; a client that asked for none drops it.
	p.NoAck = false
	r.relayed++
	f.Publish(cid, p)
	return true
}

// relayTarget is the member of upstream cell a relayed publish goes to:
// the first linked one that relays, in the order of their ids, starting
// after as many as refused. old, when no member qualifies: a linked one
// of a protocol version that does not relay.
func (n *Node) relayTarget(cell msg.NodeID) (to msg.NodeID, old *transport.Conn) {
	ms := n.relay.members[cell]
	for i := range ms {
		m := ms[(n.relay.skip[cell]+i)%len(ms)]
		c := n.peers[m]
		switch {
		case c == nil:
		case c.Peer.Version < wire.VersionRelay:
			old = c
		default:
			return m, nil
		}
	}
	return "", old
}

// relayFollow has cell's Forwarder follow the member its publishes go to
// and the link to it (retry: resend those refused), and closes the
// clients whose publishes found no link for relayTimeout.
func (n *Node) relayFollow(cell msg.NodeID, f *forward.Forwarder, retry bool) {
	to, _ := n.relayTarget(cell)
	var link any
	if to != "" {
		link = n.peers[to]
	}
	for _, s := range f.Follow(time.Now(), to, 0, link, retry) {
		n.log.Info("closing a client whose publishes found no link towards their pubend", "client", uint64(s.Client), "unanswered", s.Unanswered)
		if conn := n.clients[s.Client]; conn != nil {
			conn.CloseWith(errNoUpstream, fmt.Sprintf("broker %s has had no link to upstream cell %s for %v to relay publishes on: publish at another broker",
				n.opts.ID, cell, relayTimeout))
		}
		clientDown{}.apply(n, source{cid: s.Client})
	}
}

// relayCheck has every Forwarder with clients follow its upstream (after
// a link changed, or on the retry timer).
func (n *Node) relayCheck(retry bool) {
	for _, cell := range slices.Sorted(maps.Keys(n.relay.fwd)) {
		if f := n.relay.fwd[cell]; f.Len() > 0 {
			n.relayFollow(cell, f, retry)
		}
	}
}

// relayMsg handles a Forward from a neighbour that is not a member of
// this broker's replicated cell: a relayed publish, or the end of a
// stream, from downstream; or an answer or refusal, from upstream, for a
// client of this broker.
func (n *Node) relayMsg(from msg.NodeID, f msg.Forward) error {
	r := n.relay
	key := forward.Key{Peer: from, Stream: f.Client}
	switch m := f.Msg.(type) {
	case msg.Publish:
		if !n.downs[from] {
			return fmt.Errorf("broker %s: a relayed publish from %s, which is not a downstream neighbour", n.opts.ID, from)
		}
		cid, open, _ := r.in.Publish(key, m.Publisher, m.Seq, true, false, n.newClientID)
		if open {
			// A client of this broker like any other, its permissions
			// checked where it is connected; answered through the link.
			clientUp{conn: fwdConn{n: n, peer: from, cid: f.Client}}.apply(n, source{cid: cid})
		}
		if n.clients[cid] == nil {
			return nil // closed here (a shell lost with the leadership): its member resends in a new stream
		}
		r.taken++
		n.clientRequest(source{cid: cid}, m)
	case msg.PubAck, msg.PubAckRange, msg.PubReject:
		if fw := r.fwd[r.cellOf[from]]; fw != nil {
			fw.FromLeader(time.Now(), from, f)
		}
	case msg.Goodbye:
		if forward.Ends(m.Reason) {
			if cid, ok := r.in.End(key); ok {
				clientDown{}.apply(n, source{cid: cid})
			}
			return nil
		}
		// Refused upstream (a member of a replicated cell that does not
		// lead, under raft_clients = "redirect", or one that lost the
		// leadership): resent to the next member.
		cell := r.cellOf[from]
		if fw := r.fwd[cell]; fw != nil {
			fw.FromLeader(time.Now(), from, f)
			r.skip[cell]++
			n.relayFollow(cell, fw, false)
		}
	default:
		return fmt.Errorf("broker %s: a Forward from %s carries %T", n.opts.ID, from, f.Msg)
	}
	return nil
}

// relayLinkGone: the link to peer is gone; the streams it relayed here
// end with it (their broker resends on its next link, in new streams).
func (n *Node) relayLinkGone(peer msg.NodeID) {
	for _, cid := range n.relay.in.PeerDown(peer) {
		clientDown{}.apply(n, source{cid: cid})
	}
}
