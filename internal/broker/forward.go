package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/wire"
)

// One-hop forwarding (internal/raftphb/forward; docs/REPLICATION.md
// "Clients"): a member of a replicated PHB cell that
// does not serve keeps a publishing client's connection and forwards its
// publishes to the serving leader (forward.Forwarder); the serving leader
// takes them, of each stream a prefix (forward.Refusals), as requests of
// a client session of its shell, answered through fwdConn. A client whose
// publishes find no serving leader for ForwardTimeout is closed with the
// reason, as under redirect. All of it runs on the loop; the engine never
// sees it.

// RaftClients says what a member that does not serve does with a client.
type RaftClients string

const (
	// RaftClientsForward keeps a publishing client and forwards its
	// publishes to the serving leader (a subscribing client is closed).
	RaftClientsForward RaftClients = "forward"
	// RaftClientsRedirect closes every client with "try another member";
	// the client library moves on to the next address of its list.
	RaftClientsRedirect RaftClients = "redirect"
	// DefaultRaftClients is the mode when none is configured
	// (docs/REPLICATION.md "Clients": why).
	DefaultRaftClients = RaftClientsForward
)

// fwdConn answers a forwarded stream at the serving leader: through the
// link to the member that forwards it.
type fwdConn struct {
	n    *Node
	peer msg.NodeID
	cid  uint64
}

func (c fwdConn) Send(m msg.Msg) bool {
	switch a := m.(type) {
	case *msg.PubAck:
		m = *a // the engine's form (gd pubAckMsg); a Forward carries the value
	case *msg.PubAckRange:
		m = *a // the shell's form (shell acks.go)
	}
	if l := c.n.peers[c.peer]; l != nil {
		return l.Send(msg.Forward{Client: c.cid, Msg: m})
	}
	return false
}

// CloseWith tells the forwarding member the leader no longer serves this
// stream: it resends the client's unanswered publishes elsewhere.
func (c fwdConn) CloseWith(_ error, reason string) { c.Send(msg.Goodbye{Reason: reason}) }
func (c fwdConn) CloseFlush(reason string)         { c.Send(msg.Goodbye{Reason: reason}) }

var errNoServingLeader = errors.New("broker: no serving leader to forward to")

// fwdNet is what the Forwarder sends through: the cell's links and the
// clients' connections.
type fwdNet struct{ n *Node }

func (f fwdNet) Send(to msg.NodeID, link any, m msg.Forward) {
	l := f.n.peers[to]
	if l == nil || (link != nil && link != any(l)) {
		return
	}
	l.Send(m)
}

func (f fwdNet) ToClient(c shell.ClientID, m msg.Msg) {
	if conn := f.n.clients[c]; conn != nil {
		conn.Send(m)
	}
}

func (n *Node) forwards() bool {
	return n.raft != nil && n.raft.opts.Clients == RaftClientsForward
}

// forwardClientUp: a client connected to this standby member.
func (n *Node) forwardClientUp(cid shell.ClientID, conn clientConn, perms *auth.Perms) {
	n.raft.fwdPerms[cid] = perms
	n.raft.fwd.ClientUp(cid, clientReads(conn).AckRanges)
}

// forwardClientDown: a client of this standby member is gone; the leader
// frees its stream's session there.
func (n *Node) forwardClientDown(cid shell.ClientID) {
	n.raft.fwd.ClientDown(cid)
	delete(n.raft.fwdPerms, cid)
}

// forwardRequest: a request of a client of this standby member. A publish
// the client's user may make is forwarded (or queued behind those that
// wait for a leader); anything else closes the client, as under redirect.
func (n *Node) forwardRequest(cid shell.ClientID, m msg.Msg) {
	r := n.raft
	if !r.fwd.Has(cid) {
		return // closing
	}
	if run, ok := m.(*msg.PublishRun); ok {
		// Forwarded piece by piece: each publish is checked, kept until
		// answered and resent on its own, and a Forward carries a Publish.
		for i := range run.Publishes {
			n.forwardRequest(cid, run.Publishes[i])
		}
		return
	}
	p, ok := m.(msg.Publish)
	if !ok {
		n.forwardClientDown(cid)
		n.standbyClient(n.clients[cid])
		return
	}
	// Checked here, where the client is connected (shell/session.go): the
	// leader trusts the cell's member.
	if !r.fwdPerms[cid].MayPublish(p.Topic) {
		n.clients[cid].Send(msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: "not authorized to publish to " + p.Topic})
		return
	}
	// The Forwarder keeps a publish until the leader acks it, so a
	// forwarded publish asks for its ack; the client, which keeps no
	// publish that asked for none, drops it.
	p.NoAck = false
	r.fwd.Publish(cid, p)
}

// forwardMsg handles a Forward from cell member from: a forwarded publish
// or a stream's end (at the serving leader), or an answer or refusal for
// a client of this member (its Forwarder's).
func (n *Node) forwardMsg(from msg.NodeID, f msg.Forward) error {
	r := n.raft
	if r.raftID(from) == 0 {
		return fmt.Errorf("broker %s: a forwarded client message from %s, which is not a member of cell %s", n.opts.ID, from, r.opts.Cell)
	}
	key := forward.Key{Peer: from, Stream: f.Client}
	switch m := f.Msg.(type) {
	case msg.Publish:
		cid, open, ok := r.lead.Publish(key, m.Publisher, m.Seq, r.serving, n.peers[from].Peer.Version < wire.VersionForwardStreams, n.newClientID)
		if !ok {
			n.peers[from].Send(msg.Forward{Client: f.Client, Msg: msg.Goodbye{Reason: n.notLeaderReason()}})
			return nil
		}
		if open {
			n.clients[cid] = fwdConn{n: n, peer: from, cid: f.Client}
			// The forwarding member checked the user's permissions; it reads
			// ranges (the members of a cell speak one version) and passes
			// them on as its client reads them.
			n.sh.ClientUpWith(cid, nil, true)
		}
		n.sh.ClientRequest(cid, m)
	case msg.PubAck, msg.PubAckRange, msg.PubReject:
		r.fwd.FromLeader(time.Now(), from, f)
	case msg.Goodbye:
		if !forward.Ends(m.Reason) {
			r.fwd.FromLeader(time.Now(), from, f) // the leader refused a stream of ours
			return nil
		}
		if cid, ok := r.lead.End(key); ok { // the stream ended at the forwarding member
			delete(n.clients, cid)
			n.sh.ClientDown(cid)
		}
	default:
		return fmt.Errorf("broker %s: a Forward from %s carries %T", n.opts.ID, from, f.Msg)
	}
	return nil
}

// forwardLinkGone: the link to peer is gone (closed, dropped by a view,
// or replaced by a newer one), and handleMsg drops whatever it still
// carries. If peer is a member of this cell, the sessions of the streams
// it forwarded here close, and their refusals go (forward.Leader.PeerDown);
// so do the sessions of the streams it relayed here (relay.go).
func (n *Node) forwardLinkGone(peer msg.NodeID) {
	n.relayLinkGone(peer)
	if n.raft == nil {
		return
	}
	for _, cid := range n.raft.lead.PeerDown(peer) {
		delete(n.clients, cid)
		n.sh.ClientDown(cid)
	}
}

// forwardTarget is the member this one forwards to: the Raft leader it
// knows, if another member, linked.
func (n *Node) forwardTarget() (msg.NodeID, uint64) {
	r := n.raft
	lead, term := r.rn.Replica().Leader()
	to, ok := r.member(raftphb.Slot(lead))
	if lead == 0 || !ok || to == n.opts.ID {
		return "", term
	}
	if n.peers[to] == nil {
		return "", term
	}
	return to, term
}

// forwardCheck has the Forwarder follow the leader and its link, on every
// turn of the loop, and resend parked clients on a tick (retry); it closes
// the clients it gave up.
func (n *Node) forwardCheck(retry bool) {
	r := n.raft
	if r.serving {
		return
	}
	to, term := n.forwardTarget()
	var link any
	if to != "" {
		link = n.peers[to]
	}
	for _, s := range r.fwd.Follow(time.Now(), to, term, link, retry) {
		n.log.Info("closing a forwarded client: no serving leader", "client", uint64(s.Client), "unanswered", s.Unanswered)
		delete(r.fwdPerms, s.Client)
		conn := n.clients[s.Client]
		delete(n.clients, s.Client)
		n.sh.ClientDown(s.Client)
		if conn != nil {
			conn.CloseWith(errNoServingLeader, fmt.Sprintf("%s forwards to the leader of replicated PHB cell %s, which has had no serving leader for %v: try another member",
				n.opts.ID, r.opts.Cell, r.opts.ForwardTimeout))
		}
	}
}

// forwardServe: this member now serves. The clients it forwarded for
// become its own clients: their unanswered publishes go to the new
// engine, in order (deduplicated if the old leader committed them).
func (n *Node) forwardServe() map[shell.ClientID]bool {
	r := n.raft
	kept := map[shell.ClientID]bool{}
	for _, t := range r.fwd.TakeOver() {
		n.sh.ClientUpReading(t.Client, r.fwdPerms[t.Client], clientReads(n.clients[t.Client]))
		for _, p := range t.Publishes {
			n.sh.ClientRequest(t.Client, p)
		}
		kept[t.Client] = true
	}
	clear(r.fwdPerms)
	r.lead.Serve()
	return kept
}
