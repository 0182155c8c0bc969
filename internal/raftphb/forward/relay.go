package forward

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Relay is publishing anywhere at one broker (docs/ARCHITECTURE.md
// "Publishing anywhere"): a client may publish at a broker that does not
// host the pubend. The broker relays each such publish one hop up the
// pubend's tree, to a member of its upstream cell, over the link the
// tree's acks already travel, in a msg.Forward; the broker there does the
// same, as for a client of its own, until a broker hosting the pubend
// takes it into a client session of its shell. The answer (the PubAck
// after the fsync, or a PubReject with its reason) comes back hop by hop,
// and only then does the client hear of it.
//
// Each hop is the pair of machines a replicated PHB cell forwards with: a
// Forwarder per upstream cell keeps every publish until it is answered
// and resends the unanswered ones, in order and in a new stream, when the
// link or the member it goes to changes; a Leader keeps the streams that
// downstream neighbours relay here, each a client of this broker. A
// resend is harmless: the pubend deduplicates by publisher and sequence
// number, as it does a client's own retry after a reconnect.
//
// Relay is pure: the broker (internal/broker) and the simulator drive it
// with their links, clients and clock.
type Relay struct {
	self    msg.NodeID
	net     RelayNet
	timeout time.Duration
	hosted  []msg.PubendID
	// up maps each pubend this broker does not host, but lies in the tree
	// of, to its upstream cell; reach lists those pubends, sorted.
	up    map[msg.PubendID]msg.NodeID
	reach []msg.PubendID
	// members lists each upstream cell's brokers, sorted; cellOf is the
	// reverse.
	members map[msg.NodeID][]msg.NodeID
	cellOf  map[msg.NodeID]msg.NodeID
	// fwd relays the clients' publishes to each upstream cell; skip
	// counts the refusals from its members, so the next member is tried.
	fwd  map[msg.NodeID]*Forwarder
	skip map[msg.NodeID]int
	// clients: what each client's user may publish (nil: everything; a
	// stream relayed from downstream was checked where its client is
	// connected) and whether it reads PubAckRange.
	clients map[shell.ClientID]relayClient
	// in holds the streams downstream neighbours relay here.
	in *Leader
	// Relayed counts the publishes relayed up for clients here (a resend
	// is not counted again); Taken the relayed publishes taken from
	// downstream.
	Relayed, Taken uint64
}

type relayClient struct {
	perms  *auth.Perms
	ranges bool
}

// RelayNet is what a Relay sends through.
type RelayNet interface {
	Net
	// Link returns the link to neighbour to (an identity the Relay
	// compares) and the protocol version it speaks; ok false: not linked.
	Link(to msg.NodeID) (link any, version uint16, ok bool)
}

// RelayTimeout bounds how long a client's relayed publishes may find no
// link upstream before the broker gives the client up (it may reconnect
// elsewhere and resend); RelayRetry is how often a broker resends the
// relayed publishes an upstream member refused, to the next member.
const (
	RelayTimeout = 30 * time.Second
	RelayRetry   = 200 * time.Millisecond
)

// RelayVersion is the first protocol version of a broker that takes a
// relayed publish (wire.VersionRelay; this package does not import wire).
const RelayVersion uint16 = 18

// NewRelay returns broker self's Relay: hosted are the pubends it hosts,
// up the upstream cell of every other pubend whose tree it lies in, and
// members the brokers of each of those cells. A client whose relayed
// publishes find no link upstream for timeout is given up (Follow).
func NewRelay(self msg.NodeID, hosted []msg.PubendID, up map[msg.PubendID]msg.NodeID, members map[msg.NodeID][]msg.NodeID,
	net RelayNet, timeout time.Duration) *Relay {
	r := &Relay{self: self, net: net, timeout: timeout, hosted: slices.Sorted(slices.Values(hosted)),
		up: maps.Clone(up), members: map[msg.NodeID][]msg.NodeID{}, cellOf: map[msg.NodeID]msg.NodeID{},
		fwd: map[msg.NodeID]*Forwarder{}, skip: map[msg.NodeID]int{}, clients: map[shell.ClientID]relayClient{}, in: NewLeader(0)}
	for p, cell := range up {
		r.reach = append(r.reach, p)
		if _, ok := r.members[cell]; !ok {
			ms := slices.Sorted(slices.Values(members[cell]))
			if len(ms) == 0 {
				ms = []msg.NodeID{cell} // a cell of one, named by its broker
			}
			r.members[cell] = ms
			for _, m := range ms {
				r.cellOf[m] = cell
			}
		}
	}
	slices.Sort(r.reach)
	return r
}

// Active says whether this broker relays anything: some pubend whose
// tree it lies in is hosted elsewhere.
func (r *Relay) Active() bool { return len(r.up) > 0 }

// Reach lists the pubends this broker relays to, sorted.
func (r *Relay) Reach() []msg.PubendID { return r.reach }

// Pick is the pubend of a publisher's publishes that name none, at a
// broker that hosts none: one of those it relays to, by a hash of the
// publisher, as a PHB picks among those it hosts (shell.Broker), so all
// of them go to one pubend and stay in order.
func (r *Relay) Pick(publisher string) msg.PubendID {
	if len(r.reach) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(publisher))
	return r.reach[int(h.Sum32()%uint32(len(r.reach)))]
}

// ClientUp: client c connected; its user may publish what perms allows
// (nil: everything), and it reads PubAckRange if ranges.
func (r *Relay) ClientUp(c shell.ClientID, perms *auth.Perms, ranges bool) {
	if r.Active() {
		r.clients[c] = relayClient{perms: perms, ranges: ranges}
	}
}

// ClientDown: client c is gone; the brokers upstream free its streams.
func (r *Relay) ClientDown(c shell.ClientID) {
	if !r.Active() {
		return
	}
	delete(r.clients, c)
	for _, f := range r.fwd {
		f.ClientDown(c)
	}
}

// Relays says whether publish p goes elsewhere than this broker's own
// pubends (relayed, or refused).
func (r *Relay) Relays(p msg.Publish) bool {
	if !r.Active() {
		return false // every pubend in reach is hosted here
	}
	if p.Pubend == "" {
		return len(r.hosted) == 0
	}
	_, ok := slices.BinarySearch(r.hosted, p.Pubend)
	return !ok
}

// Publish relays publish p of client c up its pubend's tree, or refuses it
// with a reason (a PubReject to the client); false: its pubend is hosted
// here, and the caller's shell takes it. A client not up here has its
// publish dropped (a closed connection's leftovers).
func (r *Relay) Publish(now time.Time, c shell.ClientID, p msg.Publish) bool {
	if !r.Relays(p) {
		return false
	}
	rc, ok := r.clients[c]
	if !ok {
		return true
	}
	if p.Pubend == "" {
		p.Pubend = r.Pick(p.Publisher)
	}
	cell, ok := r.up[p.Pubend]
	if !ok {
		r.net.ToClient(c, msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: fmt.Sprintf(
			"pubend %q is unknown at broker %s: it is not hosted here, and no pubend of that name has this broker in its tree", p.Pubend, r.self)})
		return true
	}
	// Checked here, where the client is connected (shell/session.go): the
	// brokers upstream trust their downstream neighbour.
	if !rc.perms.MayPublish(p.Topic) {
		r.net.ToClient(c, msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: "not authorized to publish to " + p.Topic})
		return true
	}
	f := r.fwd[cell]
	if f == nil {
		f = NewForwarder(r.net, r.timeout)
		r.fwd[cell] = f
	}
	if !f.Has(c) {
		if to, old, v := r.target(cell); to == "" && old != "" {
			r.net.ToClient(c, msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: fmt.Sprintf(
				"broker %s cannot relay to pubend %q: its upstream broker %s speaks protocol version %d, and relaying publishes needs %d; publish at the pubend's PHB",
				r.self, p.Pubend, old, v, RelayVersion)})
			return true
		}
		f.ClientUp(c, rc.ranges)
		r.follow(now, cell, f, false) // gives up no one: f's clients were followed on every link change
	}
	// The Forwarder keeps a publish until its pubend acks it, so a relayed
	// publish asks for its ack; a client that asked for none drops it.
	p.NoAck = false
	r.Relayed++
	f.Publish(c, p)
	return true
}

// target is the member of upstream cell a relayed publish goes to: the
// first linked one that relays, in the order of their ids, starting after
// as many as refused. old, when no member qualifies: a linked one of a
// protocol version (v) that does not relay.
func (r *Relay) target(cell msg.NodeID) (to, old msg.NodeID, v uint16) {
	ms := r.members[cell]
	for i := range ms {
		m := ms[(r.skip[cell]+i)%len(ms)]
		_, ver, ok := r.net.Link(m)
		switch {
		case !ok:
		case ver < RelayVersion:
			old, v = m, ver
		default:
			return m, "", 0
		}
	}
	return "", old, v
}

func (r *Relay) follow(now time.Time, cell msg.NodeID, f *Forwarder, retry bool) []Stalled {
	to, _, _ := r.target(cell)
	var link any
	if to != "" {
		link, _, _ = r.net.Link(to)
	}
	return f.Follow(now, to, 0, link, retry)
}

// Follow has every upstream cell's Forwarder follow the member its
// publishes go to and the link to it: call it when a link changed, and on
// a retry timer (retry: those refused are resent, to the next member). It
// returns the clients given up, whose publishes found no link for the
// timeout: the caller closes them (and calls ClientDown).
func (r *Relay) Follow(now time.Time, retry bool) []Stalled {
	var gone []Stalled
	for _, cell := range slices.Sorted(maps.Keys(r.fwd)) {
		if f := r.fwd[cell]; f.Len() > 0 {
			gone = append(gone, r.follow(now, cell, f, retry)...)
		}
	}
	return gone
}

// Inbound is what a Forward from a neighbour asks of the caller. A
// relayed publish: the caller opens Client's session first when Open is
// set (a client of this broker, its answers sent back to Key), then
// handles Publish as a request of that client (which may relay it on).
// A stream's end: the caller closes Ended's session. Otherwise nothing.
type Inbound struct {
	Client  shell.ClientID
	Key     Key
	Open    bool
	Publish *msg.Publish
	Ended   shell.ClientID
}

// FromPeer handles a Forward from neighbour from, at now: a relayed
// publish or a stream's end, from downstream (down says from is a
// downstream neighbour); or an answer or a refusal, from upstream, for a
// client of this broker. newClient names a new stream's session.
func (r *Relay) FromPeer(now time.Time, from msg.NodeID, down bool, m msg.Forward, newClient func() shell.ClientID) (Inbound, error) {
	key := Key{Peer: from, Stream: m.Client}
	switch x := m.Msg.(type) {
	case msg.Publish:
		if !down {
			return Inbound{}, fmt.Errorf("broker %s: a relayed publish from %s, which is not a downstream neighbour", r.self, from)
		}
		cid, open, _ := r.in.Publish(key, x.Publisher, x.Seq, true, false, newClient)
		r.Taken++
		return Inbound{Client: cid, Key: key, Open: open, Publish: &x}, nil
	case msg.PubAck, msg.PubAckRange, msg.PubReject:
		if f := r.fwd[r.cellOf[from]]; f != nil {
			f.FromLeader(now, from, m)
		}
	case msg.Goodbye:
		if Ends(x.Reason) {
			if cid, ok := r.in.End(key); ok {
				return Inbound{Ended: cid}, nil
			}
			return Inbound{}, nil
		}
		// Refused upstream (a member of a replicated cell that does not
		// serve, under raft_clients = "redirect", or one that lost the
		// leadership): parked, and resent to the next member on the next
		// retry.
		cell := r.cellOf[from]
		if f := r.fwd[cell]; f != nil {
			f.FromLeader(now, from, m)
			r.skip[cell]++
		}
	default:
		return Inbound{}, fmt.Errorf("broker %s: a Forward from %s carries %T", r.self, from, m.Msg)
	}
	return Inbound{}, nil
}

// Stream returns the stream whose answers client c's session carries
// (relayed here by k.Peer); ok false: c is not a relayed stream's.
func (r *Relay) Stream(c shell.ClientID) (Key, bool) { return r.in.Stream(c) }

// PeerDown: the link to neighbour peer is gone; the sessions of the
// streams it relayed here go with it, returned in order for the caller to
// close (their broker resends on its next link, in new streams).
func (r *Relay) PeerDown(peer msg.NodeID) []shell.ClientID { return r.in.PeerDown(peer) }

// Clients counts the clients whose publishes are relayed from here now;
// Streams the streams relayed here now.
func (r *Relay) Clients() int {
	k := 0
	for _, f := range r.fwd {
		k += f.Len()
	}
	return k
}

// Streams counts the streams relayed here now.
func (r *Relay) Streams() int { return r.in.Len() }
