package forward

import (
	"github.com/aerie-mq/aerie/internal/msg"
)

// Key names a forwarded stream at the serving leader: the member that
// forwards it and its stream there (one client's publishes until a
// resend).
type Key struct {
	Peer   msg.NodeID
	Stream uint64
}

// Refusals are the forwarded streams of which a member refused a
// publish: it takes of a stream a prefix, and refuses the rest once it
// refused one. They outlive the member's shells: a refusal made while
// standing by holds once the member serves. The member that forwards
// resends in a new stream, which starts at the client's oldest unanswered
// publish.
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
type Refusals map[Key]map[string]uint64

// Take says whether a publish of stream k goes to the engine: only while
// serving, and only if none of k was refused (bySeq: unless it opens the
// resend of a version 13 member). A publish refused refuses the rest of k.
func (r Refusals) Take(k Key, publisher string, seq uint64, serving, bySeq bool) bool {
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

// RefuseAll refuses the rest of every stream of keys (a lost shell held
// publishes of theirs).
func RefuseAll[V any](r Refusals, keys map[Key]V) {
	for k := range keys {
		if r[k] == nil {
			r[k] = map[string]uint64{}
		}
	}
}

// End forgets stream k: its member ended it (its client is gone, or a new
// stream supersedes it), and nothing more of it comes on that link.
func (r Refusals) End(k Key) { delete(r, k) }

// Has says whether any stream of peer is refused.
func (r Refusals) Has(peer msg.NodeID) bool {
	for k := range r {
		if k.Peer == peer {
			return true
		}
	}
	return false
}

// ForgetPeer drops the refusals of every stream of peer: a new
// incarnation of it is linked, whose clients and streams are all new; or
// the link to it is gone, with every stream it carried (Leader.PeerDown).
func (r Refusals) ForgetPeer(peer msg.NodeID) {
	for k := range r {
		if k.Peer == peer {
			delete(r, k)
		}
	}
}
