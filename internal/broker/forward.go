package broker

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/wire"
)

// One-hop forwarding (seed 001's "one hop, ack client"; docs/ARCHITECTURE.md
// "Replicated PHB", "Clients"): a member of a replicated PHB cell that does
// not serve keeps a publishing client's connection, forwards each of its
// publishes to the serving leader in a msg.Forward over the cell's link,
// and relays the leader's PubAck or PubReject back. The forwarding member
// keeps every publish until it is answered: when the leader changes, its
// link drops or it answers that it does not serve, the member resends the
// client's unanswered publishes, in the order the client sent them, to the
// leader it knows next (the pubend's deduplication table, restored from
// the committed log, makes a publish the old leader committed an
// acknowledged duplicate). A client whose publishes find no serving leader
// for ForwardTimeout is closed with the reason, as under redirect. All of
// it runs on the loop; the engine never sees it.
//
// The member sends a client's publishes as streams (Forward.Client names
// one): a new stream for every resend and every change of leader or of
// the link to it, each in the order the client sent them and opening with
// the oldest unanswered. A leader takes of each stream a prefix
// (fwdRefusals): once it refused one of its publishes, because it did not
// serve yet or lost the shell that held some, it refuses the rest of that
// stream, and the member's resend comes as the next stream. So what the
// leader takes of a client is the client's publishes in order. Without
// that, a leader that started to serve between two of a client's
// publishes logged the later one first, and the resent earlier ones after
// it: acked, delivered, out of order (docs/known-issues/forward-reorder.md).

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
	// (docs/ARCHITECTURE.md, "Clients": why).
	DefaultRaftClients = RaftClientsForward
)

// pubKey names one publish: the pubend's deduplication key.
type pubKey struct {
	publisher string
	seq       uint64
}

// fwdPub is an unanswered publish, numbered in the order it arrived.
type fwdPub struct {
	n uint64
	p msg.Publish
}

// fwdClient is a client a standby member forwards for.
type fwdClient struct {
	conn    clientConn
	perms   *auth.Perms
	pending map[pubKey]fwdPub
	next    uint64
	// stream names the client's publishes at the leader (Forward.Client),
	// opened towards member to; streams are every one it had (answers on
	// a superseded one still count).
	stream  uint64
	to      msg.NodeID
	streams []uint64
	// parked: its unanswered publishes wait for a serving leader (none is
	// known, or the one asked does not serve); new ones queue behind them.
	parked bool
	// stalled is when the client's publishes last found no serving
	// leader, with nothing answered since (zero: not stalled).
	stalled time.Time
}

// fwdKey names a forwarded stream at the serving leader: the member that
// forwards it and its stream there (one client's publishes until a resend).
type fwdKey struct {
	peer   msg.NodeID
	client uint64
}

// forwarding is the loop-owned state of one-hop forwarding.
type forwarding struct {
	// At a standby member: the clients it forwards for, and the member
	// their publishes go to ("" while no serving leader is known) under
	// the term it leads, over link; the client each stream is for.
	clients map[shell.ClientID]*fwdClient
	target  msg.NodeID
	term    uint64
	link    *transport.Conn
	streams map[uint64]shell.ClientID
	// At the serving leader: the forwarded streams, each a client session
	// of the shell answered through fwdConn.
	in map[fwdKey]shell.ClientID
}

func newForwarding() *forwarding {
	return &forwarding{clients: map[shell.ClientID]*fwdClient{}, streams: map[uint64]shell.ClientID{}, in: map[fwdKey]shell.ClientID{}}
}

// fwdConn answers a forwarded client at the serving leader: through the
// link to the member that forwards for it.
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
// client: it resends the client's unanswered publishes elsewhere.
func (c fwdConn) CloseWith(_ error, reason string) { c.Send(msg.Goodbye{Reason: reason}) }
func (c fwdConn) CloseFlush(reason string)         { c.Send(msg.Goodbye{Reason: reason}) }

var errNoServingLeader = errors.New("broker: no serving leader to forward to")

// fwdClientGone is the reason of the Goodbye a forwarding member sends the
// leader when its client is gone.
const fwdClientGone = "client gone"

// fwdRefusals are the forwarded streams of which this member refused a
// publish: it takes of a stream a prefix, and refuses the rest once it
// refused one. It outlives the member's shells (raftState.refused): a
// refusal made while standing by holds once the member serves. The member
// that forwards resends in a new stream, which starts at the client's
// oldest unanswered publish.
//
// A forwarding member of protocol version 13 resends in the same stream
// (its client's connection): from it, a publish at or below the highest
// seq refused, per publisher, is taken as the start of its resend, and
// the stream is taken again from there. That rule is how version 13
// leaders took every stream, and it is wrong where a resend is itself
// refused in part, the leader starting to serve in its middle: the
// resend's later publishes lie at or below that seq too, were taken, and
// the next resend's earlier ones after them (docs/known-issues/
// forward-reorder.md, third cause).
type fwdRefusals map[fwdKey]map[string]uint64

// take says whether a publish of stream k goes to the engine: only while
// serving, and only if none of k was refused (bySeq: unless it opens the
// resend of a version 13 member). A publish refused refuses the rest of k.
func (r fwdRefusals) take(k fwdKey, publisher string, seq uint64, serving, bySeq bool) bool {
	last, refused := r[k]
	if refused && serving && bySeq {
		if top, ok := last[publisher]; ok && seq <= top {
			delete(r, k)
			return true
		}
	}
	if !serving || refused {
		if last == nil {
			last = map[string]uint64{}
			r[k] = last
		}
		last[publisher] = max(last[publisher], seq)
		return false
	}
	return true
}

// refuseAll refuses the rest of every one of keys (a lost shell held
// publishes of theirs).
func (r fwdRefusals) refuseAll(keys map[fwdKey]shell.ClientID) {
	for k := range keys {
		if r[k] == nil {
			r[k] = map[string]uint64{}
		}
	}
}

// forgetPeer drops the refusals of every stream of peer: a new
// incarnation of it is linked, whose clients and streams are all new.
// Not when a link to it goes down: what the member sent on that link and
// what it sends on the next belong to streams it refuses no less.
func (r fwdRefusals) forgetPeer(peer msg.NodeID) {
	for k := range r {
		if k.peer == peer {
			delete(r, k)
		}
	}
}

func (n *Node) forwards() bool {
	return n.raft != nil && n.raft.opts.Clients == RaftClientsForward
}

// forwardClientUp: a client connected to this standby member.
func (n *Node) forwardClientUp(cid shell.ClientID, conn clientConn, perms *auth.Perms) {
	fc := &fwdClient{conn: conn, perms: perms, pending: map[pubKey]fwdPub{}, parked: n.raft.fwd.target == ""}
	n.raft.fwd.clients[cid] = fc
	n.openStream(cid, fc)
}

// forwardClientDown: a client of this standby member is gone; the leader
// frees its session there.
func (n *Node) forwardClientDown(cid shell.ClientID) {
	f := n.raft.fwd
	fc, ok := f.clients[cid]
	if !ok {
		return
	}
	delete(f.clients, cid)
	n.closeStream(fc)
	for _, s := range fc.streams {
		delete(f.streams, s)
	}
}

// openStream gives fc a new stream towards the current target, and closes
// the one before at the member it went to.
func (n *Node) openStream(cid shell.ClientID, fc *fwdClient) {
	r := n.raft
	n.closeStream(fc)
	r.lastStream++
	fc.stream, fc.to = r.lastStream, r.fwd.target
	fc.streams = append(fc.streams, fc.stream)
	r.fwd.streams[fc.stream] = cid
}

// closeStream tells the member fc's stream went to that it ends: its
// session and refusal there are freed. What was sent of the stream on the
// same link arrives before.
func (n *Node) closeStream(fc *fwdClient) {
	if fc.stream == 0 || fc.to == "" {
		return
	}
	if l := n.peers[fc.to]; l != nil {
		l.Send(msg.Forward{Client: fc.stream, Msg: msg.Goodbye{Reason: fwdClientGone}})
	}
}

// forwardRequest: a request of a client of this standby member. A publish
// the client's user may make is forwarded (or queued behind those that
// wait for a leader); anything else closes the client, as under redirect.
func (n *Node) forwardRequest(cid shell.ClientID, m msg.Msg) {
	fc := n.raft.fwd.clients[cid]
	if fc == nil {
		return // closing
	}
	if r, ok := m.(*msg.PublishRun); ok {
		// Forwarded piece by piece: each publish is checked, kept until
		// answered and resent on its own, and a Forward carries a Publish.
		for i := range r.Publishes {
			n.forwardRequest(cid, r.Publishes[i])
		}
		return
	}
	p, ok := m.(msg.Publish)
	if !ok {
		delete(n.raft.fwd.clients, cid)
		n.standbyClient(fc.conn)
		return
	}
	// Checked here, where the client is connected (shell/session.go): the
	// leader trusts the cell's member.
	if !fc.perms.MayPublish(p.Topic) {
		fc.conn.Send(msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: "not authorized to publish to " + p.Topic})
		return
	}
	k := pubKey{p.Publisher, p.Seq}
	if _, dup := fc.pending[k]; dup {
		return // a retry of one still unanswered
	}
	fc.next++
	fc.pending[k] = fwdPub{n: fc.next, p: p}
	if fc.parked {
		return
	}
	// Only on the link the stream was opened on: had the link changed
	// since, the leader may have dropped what the stream sent on the old
	// one, and this publish would be taken after a gap. forwardCheck
	// resends it, in a new stream.
	if f := n.raft.fwd; f.link != nil && n.peers[f.target] == f.link {
		f.link.Send(msg.Forward{Client: fc.stream, Msg: p})
	}
}

// forwardMsg handles a Forward from cell member from: a forwarded publish
// (at the serving leader), an answer for a client of this member, or a
// Goodbye (a client gone, or a leader that does not serve it).
func (n *Node) forwardMsg(from msg.NodeID, f msg.Forward) error {
	r := n.raft
	if r.raftID(from) == 0 {
		return fmt.Errorf("broker %s: a forwarded client message from %s, which is not a member of cell %s", n.opts.ID, from, r.opts.Cell)
	}
	key := fwdKey{from, f.Client}
	switch m := f.Msg.(type) {
	case msg.Publish:
		if !r.refused.take(key, m.Publisher, m.Seq, r.serving, n.peers[from].Peer.Version < wire.VersionForwardStreams) {
			n.peers[from].Send(msg.Forward{Client: f.Client, Msg: msg.Goodbye{Reason: n.notLeaderReason()}})
			return nil
		}
		cid, ok := r.fwd.in[key]
		if !ok {
			cid = n.newClientID()
			r.fwd.in[key] = cid
			n.clients[cid] = fwdConn{n: n, peer: from, cid: f.Client}
			// The forwarding member checked the user's permissions; it reads
			// ranges (the members of a cell speak one version) and passes
			// them on as its client reads them.
			n.sh.ClientUpWith(cid, nil, true)
		}
		n.sh.ClientRequest(cid, m)
	case msg.PubAck:
		n.forwardAnswer(r.fwd.streams[f.Client], pubKey{m.Publisher, m.Seq}, m)
	case msg.PubAckRange:
		n.forwardRange(r.fwd.streams[f.Client], m)
	case msg.PubReject:
		n.forwardAnswer(r.fwd.streams[f.Client], pubKey{m.Publisher, m.Seq}, m)
	case msg.Goodbye:
		if m.Reason == fwdClientGone {
			delete(r.refused, key)
		}
		if cid, ok := r.fwd.in[key]; ok {
			// The forwarding member's client is gone.
			delete(r.fwd.in, key)
			delete(n.clients, cid)
			n.sh.ClientDown(cid)
			return nil
		}
		if fc := r.fwd.clients[r.fwd.streams[f.Client]]; fc != nil && fc.stream == f.Client && from == r.fwd.target {
			// The leader does not serve (yet, or any more): resend on the
			// next tick, or to the next leader. (A refusal of a stream
			// already superseded asks for nothing: its resend is under way.)
			fc.parked = true
			if fc.stalled.IsZero() {
				fc.stalled = time.Now()
			}
		}
	default:
		return fmt.Errorf("broker %s: a Forward from %s carries %T", n.opts.ID, from, f.Msg)
	}
	return nil
}

func (n *Node) forwardAnswer(cid shell.ClientID, k pubKey, m msg.Msg) {
	fc := n.raft.fwd.clients[cid]
	if fc == nil {
		return
	}
	if _, ok := fc.pending[k]; !ok {
		return // answered before (a resend's duplicate answer)
	}
	delete(fc.pending, k)
	fc.stalled = time.Time{}
	fc.conn.Send(m)
}

// forwardRange relays the leader's range of acks for a client of this
// member: whole, if the client reads ranges and every publish in it was
// unanswered; else a PubAck for each one that was (a resend's duplicate
// answer is dropped, as in forwardAnswer).
func (n *Node) forwardRange(cid shell.ClientID, r msg.PubAckRange) {
	fc := n.raft.fwd.clients[cid]
	if fc == nil {
		return
	}
	answered := 0
	for i := range r.Len() {
		if _, ok := fc.pending[pubKey{r.Publisher, r.Seq + uint64(i)}]; ok {
			answered++
		}
	}
	if answered == 0 {
		return
	}
	fc.stalled = time.Time{}
	whole := answered == r.Len() && clientReads(fc.conn).AckRanges
	for i := range r.Len() {
		k := pubKey{r.Publisher, r.Seq + uint64(i)}
		if _, ok := fc.pending[k]; !ok {
			continue
		}
		delete(fc.pending, k)
		if !whole {
			fc.conn.Send(r.Ack(i))
		}
	}
	if whole {
		fc.conn.Send(r)
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

// forwardCheck follows the leader: when it changes (or its link), every
// client's unanswered publishes go to the new one, in a new stream. On a
// tick (retry) the parked clients are resent too, and those stalled for
// longer than ForwardTimeout are closed.
func (n *Node) forwardCheck(retry bool) {
	r := n.raft
	f := r.fwd
	if r.serving || len(f.clients) == 0 {
		f.target, f.term, f.link = "", 0, nil
		return
	}
	to, term := n.forwardTarget()
	link := n.peers[to]
	changed := to != f.target || term != f.term || link != f.link
	f.target, f.term, f.link = to, term, link
	if !changed && !retry {
		return // the common case, on every turn of the loop
	}
	now := time.Now()
	for cid, fc := range f.clients {
		if changed {
			n.openStream(cid, fc)
		}
		if len(fc.pending) == 0 {
			fc.parked, fc.stalled = to == "", time.Time{}
			continue
		}
		if to == "" {
			fc.parked = true
			if fc.stalled.IsZero() {
				fc.stalled = now
			}
			if retry && now.Sub(fc.stalled) > r.opts.ForwardTimeout {
				n.log.Info("closing a forwarded client: no serving leader", "client", uint64(cid), "unanswered", len(fc.pending))
				n.forwardClientDown(cid)
				delete(n.clients, cid)
				n.sh.ClientDown(cid)
				fc.conn.CloseWith(errNoServingLeader, fmt.Sprintf("%s forwards to the leader of replicated PHB cell %s, which has had no serving leader for %v: try another member",
					n.opts.ID, r.opts.Cell, r.opts.ForwardTimeout))
			}
			continue
		}
		if changed || (retry && fc.parked) {
			n.resend(cid, fc, changed)
		}
	}
}

// resend sends a client's unanswered publishes, in the order they came,
// in a new stream (opened already when the leader or link changed).
func (n *Node) resend(cid shell.ClientID, fc *fwdClient, opened bool) {
	if !opened {
		n.openStream(cid, fc)
	}
	fc.parked = false
	ps := make([]fwdPub, 0, len(fc.pending))
	for _, p := range fc.pending {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b fwdPub) int { return cmp.Compare(a.n, b.n) })
	l := n.raft.fwd.link
	for _, p := range ps {
		l.Send(msg.Forward{Client: fc.stream, Msg: p.p})
	}
}

// forwardServe: this member now serves. The clients it forwarded for
// become its own clients: their unanswered publishes go to the new
// engine, in order (deduplicated if the old leader committed them).
func (n *Node) forwardServe() map[shell.ClientID]bool {
	f := n.raft.fwd
	kept := map[shell.ClientID]bool{}
	for cid, fc := range f.clients {
		n.sh.ClientUpReading(cid, fc.perms, clientReads(fc.conn))
		ps := make([]fwdPub, 0, len(fc.pending))
		for _, p := range fc.pending {
			ps = append(ps, p)
		}
		slices.SortFunc(ps, func(a, b fwdPub) int { return cmp.Compare(a.n, b.n) })
		for _, p := range ps {
			n.sh.ClientRequest(cid, p.p)
		}
		kept[cid] = true
	}
	n.raft.fwd = newForwarding()
	return kept
}
