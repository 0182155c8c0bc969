package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/lattrace"
	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/wire"
)

// event is what a connection or membership goroutine hands to the loop:
// a message from a peer or a client (the hot path, passed by value so
// nothing is boxed per message), or a change (a connection opened or
// closed, a view installed).
type event struct {
	src source
	m   msg.Msg   // a message from src; nil when ctl or ms is set
	ms  []msg.Msg // a burst of messages from src, read together (transport.Conn.RunBatch)
	ctl change
}

// source is the connection an event came from: a link to a neighbour
// broker, or a client connection.
type source struct {
	peer msg.NodeID // "" for a client
	cid  shell.ClientID
	conn *transport.Conn
	// free takes the loop's handled bursts back to the connection's
	// reader, which fills them again: a burst costs no allocation.
	free chan []msg.Msg
}

// newSource is a connection's source, with its pool of bursts.
func newSource(peer msg.NodeID, cid shell.ClientID, conn *transport.Conn) source {
	return source{peer: peer, cid: cid, conn: conn, free: make(chan []msg.Msg, burstsPerConn)}
}

// burstsPerConn is how many handled bursts a connection keeps for reuse:
// enough for the bursts of one connection that wait in the inbox together
// under load; more are allocated and dropped.
const burstsPerConn = 8

// postBurst is a connection reader's deliver: it posts the burst to the
// loop and takes an empty one back for the next (transport.Conn.RunBatch).
func (n *Node) postBurst(ctx context.Context, src source, ms []msg.Msg) []msg.Msg {
	n.post(ctx, event{src: src, ms: ms})
	select {
	case b := <-src.free:
		return b
	default:
		return make([]msg.Msg, 0, transport.MaxBatch)
	}
}

// recycle hands a handled burst back to its connection's reader.
func (src source) recycle(ms []msg.Msg) {
	clear(ms) // do not pin the messages until the slice is refilled
	select {
	case src.free <- ms[:0]:
	default:
	}
}

// change is an event other than a message.
type change interface {
	apply(n *Node, src source)
}

type peerUp struct{ inc uint64 }

func (c peerUp) apply(n *Node, src source) {
	if old := n.peers[src.peer]; old != nil && old != src.conn {
		old.Close()
		n.forwardLinkGone(src.peer) // its leftovers are dropped from now on
	}
	if prev, ok := n.peerInc[src.peer]; ok && prev != c.inc && n.raft != nil {
		// A new incarnation of the member: the clients it forwarded
		// for are gone, and with them what this member refused of theirs.
		n.raft.lead.PeerRestarted(src.peer)
	}
	if n.raft != nil {
		n.raft.lead.PeerUp(src.peer)
	}
	n.peers[src.peer] = src.conn
	n.peerInc[src.peer] = c.inc
	n.log.Info("link up", "peer", string(src.peer), "addr", src.conn.RemoteAddr())
	n.sh.PeerUp(src.peer, c.inc)
	n.relayCheck(false)
}

type peerDown struct{}

func (peerDown) apply(n *Node, src source) {
	if n.peers[src.peer] == src.conn {
		delete(n.peers, src.peer)
		n.log.Info("link down", "peer", string(src.peer), "err", src.conn.Err())
		n.sh.PeerDown(src.peer)
		if n.raft != nil {
			n.raftPeerDown(src.peer)
		}
		n.forwardLinkGone(src.peer)
		n.relayCheck(false)
	}
}

// clientUp: a client connection is open, for a user with perms (nil: no
// users are configured); conn answers for it (nil: the aerie connection
// src.conn).
type clientUp struct {
	conn  clientConn
	perms *auth.Perms
}

func (c clientUp) apply(n *Node, src source) {
	if c.conn != nil {
		n.clients[src.cid] = c.conn
	} else {
		n.clients[src.cid] = src.conn
	}
	n.sh.ClientUpReading(src.cid, c.perms, clientReads(n.clients[src.cid]))
	n.relayClientUp(src.cid, c.perms)
	if n.raft != nil && !n.raft.serving {
		if n.forwards() {
			n.forwardClientUp(src.cid, n.clients[src.cid], c.perms)
			return
		}
		n.standbyClient(n.clients[src.cid])
	}
}

// clientReads says which coalesced frames a client connection reads: an
// aerie client of protocol version 11 or later reads PubAckRange, of 13 or
// later DeliveryRun (an MQTT client, or a forwarded one, gets a PubAck per
// publish and a Delivery per event).
func clientReads(c clientConn) shell.Reads {
	if _, ok := c.(fwdConn); ok {
		// A stream relayed here: its broker splits a range for a client
		// that reads none (forward.Forwarder).
		return shell.Reads{AckRanges: true}
	}
	tc, ok := c.(*transport.Conn)
	if !ok {
		return shell.Reads{}
	}
	return shell.Reads{AckRanges: tc.Peer.Version >= wire.VersionPubAckRange, DeliveryRuns: tc.Peer.Version >= wire.VersionDeliveryRun,
		ReportsTaken: tc.Peer.Version >= wire.VersionSubConsumed}
}

type clientDown struct{}

func (clientDown) apply(n *Node, src source) {
	if _, ok := n.clients[src.cid]; ok {
		n.sh.ClientDown(src.cid)
		delete(n.clients, src.cid)
	}
	n.relay.ClientDown(src.cid)
	if n.raft != nil {
		n.forwardClientDown(src.cid)
	}
}

type viewInstalled struct{ c member.Change }

func (v viewInstalled) apply(n *Node, _ source) { n.installView(v.c) }

// handle handles one event and reports how many messages it carried.
func (n *Node) handle(ev event) int {
	if ev.ctl != nil {
		ev.ctl.apply(n, ev.src)
		return 1
	}
	if ev.ms == nil {
		n.handleMsg(ev.src, ev.m)
		return 1
	}
	// One reading of the clock for the burst (Node.Now): the messages
	// were read together, and a clock read per message was about 1 % of a
	// busy broker's CPU.
	n.burstNow = tick.Time(time.Now().UnixNano())
	if n.traceHop >= 0 {
		for _, m := range ev.ms {
			lattrace.MarkMsg(lattrace.Slot(n.traceHop, lattrace.Loop), m, int64(n.burstNow))
		}
	}
	for _, m := range ev.ms {
		n.handleMsg(ev.src, m)
	}
	n.burstNow = 0
	k := len(ev.ms)
	ev.src.recycle(ev.ms)
	return k
}

func (n *Node) handleMsg(src source, m msg.Msg) {
	switch {
	case src.peer != "":
		if n.peers[src.peer] != src.conn {
			return // a replaced connection's leftovers
		}
		if f, ok := m.(msg.Forward); ok {
			var err error
			if n.raft != nil && n.raft.raftID(src.peer) != 0 {
				err = n.forwardMsg(src.peer, f) // within the cell
			} else {
				err = n.relayMsg(src.peer, f) // along a pubend's tree
			}
			if err != nil {
				n.log.Warn("closing link after protocol error", "peer", string(src.peer), "err", err)
				src.conn.CloseWith(err, "protocol error: "+err.Error())
			}
			return
		}
		switch m.(type) {
		case msg.RaftChunk, msg.RaftChunkAck:
			if n.raft != nil {
				if err := n.stepRaftChunk(src.peer, m); err != nil {
					n.log.Warn("closing link after protocol error", "peer", string(src.peer), "err", err)
					src.conn.CloseWith(err, "protocol error: "+err.Error())
				}
				return
			}
		}
		if r, ok := m.(msg.Raft); ok && n.raft != nil {
			if err := n.stepRaft(src.peer, r); err != nil {
				n.log.Warn("closing link after protocol error", "peer", string(src.peer), "err", err)
				src.conn.CloseWith(err, "protocol error: "+err.Error())
			}
			return
		}
		if err := n.sh.PeerMsg(src.peer, m); err != nil {
			// Not a broker-to-broker message: a protocol error on this link.
			n.log.Warn("closing link after protocol error", "peer", string(src.peer), "err", err)
			src.conn.CloseWith(err, "protocol error: "+err.Error())
		}
	default:
		n.clientRequest(src, m)
	}
}

// clientRequest handles a request of client connection src (or of a
// stream a downstream neighbour relays here, relay.go).
func (n *Node) clientRequest(src source, m msg.Msg) {
	if !n.clientMayRun(src, m) {
		return // a frame newer than the version its client announced
	}
	m, ok := n.frontDoor(src.cid, m)
	switch {
	case !ok:
		// Every publish of m refused here, where the client is connected.
	case n.relayRequest(src.cid, m):
		// A publish to a pubend hosted elsewhere: relayed up its tree.
	case n.raft != nil && !n.raft.serving:
		// A standby member forwards a client's publishes to the serving
		// leader; redirected, the connection is closing and the client
		// resends to the member it reaches next.
		if n.forwards() {
			n.forwardRequest(src.cid, m)
		}
	default:
		n.sh.ClientRequest(src.cid, m)
	}
}

// clientMayRun reports whether m, from client connection src, uses no
// frame newer than the version its client announced: a PublishRun before
// wire.VersionPublishRun, a publish that asks for no ack before
// wire.VersionPublishNoAck. Such a client is closed for a protocol error.
func (n *Node) clientMayRun(src source, m msg.Msg) bool {
	var what string
	var since uint16
	run := false
	switch m := m.(type) {
	case *msg.PublishRun:
		what, since, run = "PublishRun", wire.VersionPublishRun, true
		if m.Publishes[0].NoAck { // a decoded run has a publish; all ask alike
			what, since = "PublishRunNoAck", wire.VersionPublishNoAck
		}
	case msg.Publish:
		if !m.NoAck {
			return true
		}
		what, since = "PublishNoAck", wire.VersionPublishNoAck
	default:
		return true
	}
	tc, ok := n.clients[src.cid].(*transport.Conn)
	if !ok || tc.Peer.Version >= since {
		if run {
			n.publishRuns.Add(1)
		}
		return true
	}
	err := fmt.Errorf("broker: client %s of version %d sent a %s (version %d on)", tc.Peer.ID, tc.Peer.Version, what, since)
	n.log.Warn("closing client after protocol error", "err", err)
	tc.CloseWith(err, fmt.Sprintf("protocol error: %s before version %d", what, since))
	// Gone now, not when the close is reported: what it sent after the
	// bad frame, in the same read, is a closed connection's leftovers.
	clientDown{}.apply(n, src)
	return false
}

// inboxBatch bounds how many queued messages the loop handles between two
// selects (whole bursts, so a little more): one select per batch instead
// of per message, and timers and fsync completions wait at most this.
const inboxBatch = 128

func (n *Node) loop(ctx context.Context) error {
	t := time.NewTicker(n.opts.GD.TickInterval)
	defer t.Stop()
	trim := time.NewTicker(n.opts.TrimInterval)
	defer trim.Stop()
	n.monkey = newMonkey(n.opts.Monkey)
	defer n.monkey.stop()
	if n.monkey != nil {
		for _, f := range n.monkey.faults() {
			n.chaos[f] = 0 // counted from zero, so alerts see the series at once
		}
	}
	var raftTick <-chan time.Time
	var raftSynced <-chan error
	if n.raft != nil {
		rt := time.NewTicker(n.raft.opts.TickInterval)
		defer rt.Stop()
		raftTick, raftSynced = rt.C, n.raft.synced
	}
	var memTick <-chan time.Time
	if n.opts.MemoryBudget > 0 {
		mt := time.NewTicker(n.opts.MemoryEvery)
		defer mt.Stop()
		memTick = mt.C
	}
	var relayTick <-chan time.Time
	if n.relay.Active() {
		rt := time.NewTicker(relayRetry)
		defer rt.Stop()
		relayTick = rt.C
	}
	for {
		select {
		case <-relayTick:
			n.relayCheck(true)
		case <-memTick:
			n.sh.Memory(n.opts.liveHeap(), n.opts.MemoryBudget)
		case <-raftTick:
			n.raft.rn.Tick()
			if err := n.raftHeldEvents(); err != nil {
				n.closeAll("broker storage failed")
				return fmt.Errorf("%w, stopping (crash-only)", err)
			}
			n.raft.lead.Tick()
			n.joinWatch()
			n.awaitWatch()
			n.forwardCheck(true)
		case err := <-raftSynced:
			if err := n.raftSynced(err); err != nil {
				n.closeAll("broker storage failed")
				return fmt.Errorf("%w, stopping (crash-only)", err)
			}
		case <-n.raftResumeC():
			if err := n.raftResume(); err != nil {
				n.closeAll("broker storage failed")
				return fmt.Errorf("%w, stopping (crash-only)", err)
			}
		case <-trim.C:
			if n.store != nil || n.raft != nil {
				// Room an operator made while no job ran (the persister
				// measures after each; a replicated member only here).
				n.sh.DiskRoom(diskRoom(n.opts.DataDir))
			}
			n.sh.Trim()
		case <-n.monkey.fired():
			n.monkeyAct()
		case <-ctx.Done():
			n.finish()
			n.closeAll("broker shutting down")
			return nil
		case <-t.C:
			n.sh.Tick()
		case ev := <-n.inbox:
			for k := n.handle(ev); k < inboxBatch; {
				select {
				case ev := <-n.inbox:
					k += n.handle(ev)
					continue
				default:
				}
				break
			}
		case c := <-n.done:
			if n.traceHop >= 0 {
				markPersisted(n.traceHop, c)
			}
			n.sh.DiskRoom(n.disk.free.Load())
			if err := c.report(n.sh); err != nil {
				n.closeAll("broker storage failed")
				return fmt.Errorf("%w, stopping (crash-only)", err)
			}
		case reply := <-n.status:
			reply <- n.snapshot()
		}
		n.sh.Drain()
		if n.raft != nil {
			if err := n.runRaft(); err != nil {
				n.closeAll("broker storage failed")
				return fmt.Errorf("%w, stopping (crash-only)", err)
			}
			n.forwardCheck(false)
		}
	}
}

// finish waits for the batch in flight at shutdown, so that its
// publishers get their acks, and for any other job the persister holds.
func (n *Node) finish() {
	if n.raft != nil {
		// A batch commits only with the cell: nothing to wait for here
		// (crash-only; the publishers' retries are deduplicated) but the
		// Raft log's fsync, before the log is closed.
		if n.raft.syncing {
			<-n.raft.synced
			n.raft.syncing = false
		}
		return
	}
	// A log down for a full disk waits for a reopen that a stopping
	// broker does not make: nothing of it was acked, nothing to wait for.
	for !n.sh.Idle() && !n.sh.Stalled() {
		if err := (<-n.done).report(n.sh); err != nil {
			return // a failed fsync: nothing to ack
		}
		n.sh.Drain()
	}
}

// frontDoor refuses, here where client cid is connected, the publishes of
// m that every broker would refuse (msg.CheckPublish: a bad topic, an
// event above the limit), before they are relayed up a pubend's tree or
// forwarded to a cell's leader, and returns what is left of m; false when
// nothing is. The shell of the pubend's broker checks again, for the
// publishes that arrive relayed or forwarded.
func (n *Node) frontDoor(cid shell.ClientID, m msg.Msg) (msg.Msg, bool) {
	switch p := m.(type) {
	case msg.Publish:
		if err := msg.CheckPublish(p.Topic, p.Props, p.Payload); err != nil {
			n.ToClient(cid, msg.PubReject{Publisher: p.Publisher, Seq: p.Seq, Reason: err.Error()})
			return nil, false
		}
	case *msg.PublishRun:
		bad := 0
		for i := range p.Publishes {
			q := &p.Publishes[i]
			if msg.CheckPublish(q.Topic, q.Props, q.Payload) != nil {
				bad++
			}
		}
		if bad == 0 {
			return m, true // every run of a client that checks its input: no allocation
		}
		good := make([]msg.Publish, 0, len(p.Publishes)-bad)
		for _, q := range p.Publishes {
			if err := msg.CheckPublish(q.Topic, q.Props, q.Payload); err != nil {
				n.ToClient(cid, msg.PubReject{Publisher: q.Publisher, Seq: q.Seq, Reason: err.Error()})
				continue
			}
			good = append(good, q)
		}
		if len(good) == 0 {
			return nil, false
		}
		return &msg.PublishRun{Publishes: good}, true
	}
	return m, true
}
