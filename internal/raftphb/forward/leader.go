package forward

import (
	"cmp"
	"maps"
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Leader is the serving side of forwarding at a member of a replicated PHB
// cell: the streams other members forward to it, each a client session of
// its shell while it serves, and the Refusals that keep what it takes of
// each stream a prefix. It outlives the member's shells (a refusal made
// while standing by holds once it serves). It opens, closes and answers
// nothing itself: its methods say which sessions the caller opens or
// closes and which streams it tells; the broker and the simulator run the
// same Leader.
type Leader struct {
	refused Refusals
	in      map[Key]shell.ClientID
	out     map[shell.ClientID]Key
	// bySeq are the members of protocol version 13, whose streams are
	// their clients' connections and so outlive a link (Refusals).
	bySeq map[msg.NodeID]bool
	// unlinked counts, for each member of version 13 whose link is gone
	// while it has refusals here, the ticks since (Tick); at linger its
	// refusals go.
	unlinked map[msg.NodeID]int
	linger   int
}

// NewLeader returns a Leader with no streams. The refusals of a member of
// protocol version 13 outlive its link by linger ticks (Tick; 0: until
// its next incarnation): set it above that member's forward timeout, after
// which the member has given up every client it could not forward for.
func NewLeader(linger int) *Leader {
	return &Leader{refused: Refusals{}, in: map[Key]shell.ClientID{}, out: map[shell.ClientID]Key{},
		bySeq: map[msg.NodeID]bool{}, unlinked: map[msg.NodeID]int{}, linger: linger}
}

// Publish takes a publish forwarded on stream k, from the member's
// publisher with seq. ok false: it is refused (the caller answers the
// stream's member with a Goodbye, and the member resends elsewhere);
// serving says whether this member serves, bySeq whether the member that
// forwards it speaks protocol version 13 (Refusals.Take). Otherwise cid is
// the stream's session, which the caller opens first when open is set,
// under the id newClient gives.
func (l *Leader) Publish(k Key, publisher string, seq uint64, serving, bySeq bool, newClient func() shell.ClientID) (cid shell.ClientID, open, ok bool) {
	delete(l.unlinked, k.Peer) // it came on a link that is up
	if bySeq {
		l.bySeq[k.Peer] = true
	} else {
		delete(l.bySeq, k.Peer)
	}
	if !l.refused.Take(k, publisher, seq, serving, bySeq) {
		return 0, false, false
	}
	if cid, ok := l.in[k]; ok {
		return cid, false, true
	}
	cid = newClient()
	l.in[k], l.out[cid] = cid, k
	return cid, true, true
}

// Ends reports whether a Goodbye with reason on a Forward from a cell
// member is the end of a stream it forwards here (ClientGone: its client
// is gone, or a new stream supersedes it), for End; any other reason is a
// serving leader's refusal of a stream this member forwards, for its
// Forwarder. The two directions may use the same stream number.
func Ends(reason string) bool { return reason == ClientGone }

// End forgets stream k, which its member ended: nothing more of it comes.
// ok: the stream had a session here, cid, which the caller closes.
func (l *Leader) End(k Key) (cid shell.ClientID, ok bool) {
	l.refused.End(k)
	if cid, ok = l.in[k]; ok {
		delete(l.in, k)
		delete(l.out, cid)
	}
	return cid, ok
}

// Stream returns the stream whose answers session c carries: the engine's
// answers to c go to k.Peer, in a Forward for k.Stream. ok false: c is
// not a forwarded stream's session.
func (l *Leader) Stream(c shell.ClientID) (k Key, ok bool) {
	k, ok = l.out[c]
	return k, ok
}

// PeerDown: the link to cell member peer is gone (closed, or replaced by
// a newer one), and the caller reads nothing more of what it carried (the
// broker drops a replaced connection's leftovers, the simulator a closed
// link's). The sessions of its streams go with it, returned in order for
// the caller to close, and so do their refusals: a member sends a stream
// on the link it opened it on only (Forwarder), so nothing more of those
// streams can come, and their ends (ClientGone), sent on whichever link
// is up, may have been lost with it. A member of protocol version 13
// keeps its refusals: its streams outlive a link (Refusals); they go once
// its link has stayed down for linger ticks (Tick).
func (l *Leader) PeerDown(peer msg.NodeID) []shell.ClientID {
	if !l.bySeq[peer] {
		l.refused.ForgetPeer(peer)
	} else if _, counting := l.unlinked[peer]; !counting && l.linger > 0 && l.refused.Has(peer) {
		l.unlinked[peer] = 0
	}
	var gone []shell.ClientID
	for k, cid := range l.in {
		if k.Peer == peer {
			delete(l.in, k)
			delete(l.out, cid)
			gone = append(gone, cid)
		}
	}
	slices.Sort(gone)
	return gone
}

// PeerRestarted: a new incarnation of cell member peer is linked; its
// clients and streams are all new, and what was refused of the old ones
// is forgotten.
func (l *Leader) PeerRestarted(peer msg.NodeID) {
	l.refused.ForgetPeer(peer)
	delete(l.bySeq, peer)
	delete(l.unlinked, peer)
}

// PeerUp: a link to cell member peer is up; the refusals of its streams
// stay while it lasts.
func (l *Leader) PeerUp(peer msg.NodeID) { delete(l.unlinked, peer) }

// Tick is one tick of the caller's timer (the broker's and the
// simulator's Raft tick). The refusals of a member of protocol version 13
// whose link has been down for linger ticks go: its streams are its
// clients' connections, and a client whose publishes found no serving
// leader linked for its member's forward timeout was given up there, its
// end (ClientGone) lost with no link to carry it; a client still
// connected there resends its unanswered publishes from the oldest when
// the member next forwards to this one (Refusals), which takes them in
// order. So what a Leader keeps per stream is freed by the stream's end,
// its link's loss (protocol version 14 on), this timer (version 13), or
// the member's next incarnation: none of it outlives its owner
// (docs/RELIABILITY.md "Running for weeks").
func (l *Leader) Tick() {
	for peer, n := range l.unlinked {
		if n+1 < l.linger {
			l.unlinked[peer] = n + 1
			continue
		}
		l.refused.ForgetPeer(peer)
		delete(l.bySeq, peer)
		delete(l.unlinked, peer)
	}
}

// Serve: the member starts to serve, with a new shell: no session of an
// earlier one carries over (the streams it took then were refused when
// it lost the leadership, Lost).
func (l *Leader) Serve() {
	clear(l.in)
	clear(l.out)
}

// Lost: the member no longer serves. The shell it loses held publishes of
// every stream it took: the rest of each is refused, should it serve
// again. It returns those streams in order: the caller tells each one's
// member (a Goodbye), which resends to the next leader in a new stream.
func (l *Leader) Lost() []Key {
	RefuseAll(l.refused, l.in)
	keys := slices.SortedFunc(maps.Keys(l.in), func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.Stream, b.Stream))
	})
	clear(l.in)
	clear(l.out)
	return keys
}

// Len is how many forwarded streams have a session here.
func (l *Leader) Len() int { return len(l.in) }

// Refused is how many forwarded streams are refused here.
func (l *Leader) Refused() int { return len(l.refused) }
