package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Publishing anywhere (forward.Relay; docs/ARCHITECTURE.md "Publishing
// anywhere"): a client (aerie or MQTT) may publish at a broker that does
// not host the pubend; the broker relays the publish one hop up the
// pubend's tree, and the brokers above do the same, until the PHB takes
// it. A stream relayed here from downstream is a client of this broker
// like any other (answered through fwdConn), so its publishes go the same
// way: into the shell, to the cell's serving leader, or on up. All of it
// runs on the loop; the engine never sees it.

const relayTimeout, relayRetry = forward.RelayTimeout, forward.RelayRetry

var errNoUpstream = errors.New("broker: no link towards the pubend to relay publishes on")

// newRelay is the broker's forward.Relay over its routes and links.
func (n *Node) newRelay(members func(msg.NodeID) []msg.NodeID) *forward.Relay {
	up := map[msg.PubendID]msg.NodeID{}
	cells := map[msg.NodeID][]msg.NodeID{}
	for _, r := range n.opts.Routes {
		if r.Up != "" {
			up[r.Pubend] = r.Up
			cells[r.Up] = members(r.Up)
		}
	}
	return forward.NewRelay(n.opts.ID, n.hosted, up, cells, relayNet{fwdNet{n}}, relayTimeout)
}

// relayNet is a Relay's way out: the broker's links and clients.
type relayNet struct{ fwdNet }

func (r relayNet) Link(to msg.NodeID) (any, uint16, bool) {
	c := r.n.peers[to]
	if c == nil {
		return nil, 0, false
	}
	return c, c.Peer.Version, true
}

// mqttPubends are the pubends the MQTT listener's publishes go to: those
// hosted here, else those reachable upstream.
func (n *Node) mqttPubends() []msg.PubendID {
	if len(n.hosted) > 0 {
		return n.hosted
	}
	return n.relay.Reach()
}

// relayClientUp: client cid may publish what perms allows.
func (n *Node) relayClientUp(cid shell.ClientID, perms *auth.Perms) {
	n.relay.ClientUp(cid, perms, clientReads(n.clients[cid]).AckRanges)
}

// relayRequest relays client cid's publishes whose pubend is not hosted
// here, or refuses them; false: m is for this broker's shell (or its
// cell's leader).
func (n *Node) relayRequest(cid shell.ClientID, m msg.Msg) bool {
	r := n.relay
	if !r.Active() {
		return false
	}
	switch m := m.(type) {
	case msg.Publish:
		return r.Publish(time.Now(), cid, m)
	case *msg.PublishRun:
		relays := false
		for i := range m.Publishes {
			relays = relays || r.Relays(m.Publishes[i])
		}
		if !relays {
			return false
		}
		// Piece by piece: each publish is relayed (or taken here) on its own.
		now := time.Now()
		for i := range m.Publishes {
			if p := m.Publishes[i]; !r.Publish(now, cid, p) {
				n.hostedRequest(cid, p)
			}
		}
		return true
	}
	return false
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

// relayCheck has the Relay follow the links upstream (after a link
// changed, or on the retry timer), and closes the clients whose publishes
// found no link for relayTimeout.
func (n *Node) relayCheck(retry bool) {
	if !n.relay.Active() {
		return
	}
	for _, s := range n.relay.Follow(time.Now(), retry) {
		n.log.Info("closing a client whose publishes found no link towards their pubend", "client", uint64(s.Client), "unanswered", s.Unanswered)
		if conn := n.clients[s.Client]; conn != nil {
			conn.CloseWith(errNoUpstream, fmt.Sprintf("broker %s has had no link upstream for %v to relay publishes on: publish at another broker",
				n.opts.ID, relayTimeout))
		}
		clientDown{}.apply(n, source{cid: s.Client})
	}
}

// relayMsg handles a Forward from a neighbour that is not a member of
// this broker's replicated cell: a relayed publish, or the end of a
// stream, from downstream; or an answer or refusal, from upstream, for a
// client of this broker.
func (n *Node) relayMsg(from msg.NodeID, f msg.Forward) error {
	in, err := n.relay.FromPeer(time.Now(), from, n.downs[from], f, n.newClientID)
	switch {
	case err != nil:
		return err
	case in.Ended != 0:
		clientDown{}.apply(n, source{cid: in.Ended})
	case in.Publish != nil:
		if in.Open {
			// A client of this broker like any other, its permissions
			// checked where it is connected; answered through the link.
			clientUp{conn: fwdConn{n: n, peer: from, cid: f.Client}}.apply(n, source{cid: in.Client})
		}
		if n.clients[in.Client] == nil {
			return nil // closed here (a shell lost with the leadership): its broker resends in a new stream
		}
		n.clientRequest(source{cid: in.Client}, *in.Publish)
	}
	return nil
}

// relayLinkGone: the link to peer is gone; the streams it relayed here
// end with it (their broker resends on its next link, in new streams).
func (n *Node) relayLinkGone(peer msg.NodeID) {
	for _, cid := range n.relay.PeerDown(peer) {
		clientDown{}.apply(n, source{cid: cid})
	}
}
