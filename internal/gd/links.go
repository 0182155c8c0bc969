package gd

import "github.com/aerie-mq/aerie/internal/msg"

// linkUp: a (re)connected upstream learns our summary and acks again (it may
// have restarted and lost them); pending subscription requests are resent.
// A restarted downstream may hold other subscriptions than its previous
// incarnation: its filter passes everything until it reports again (docs/CONCEPTS.md
// P6), and curiosity its predecessor expressed is dropped. A downstream that
// merely reconnected keeps its filter: narrowing it would contradict what it
// received under the wider one.
func (e *Engine) linkUp(peer msg.NodeID, inc uint64) {
	e.live[peer] = true
	if d := e.downs[peer]; d != nil && d.incarnation != inc {
		d.incarnation = inc
		d.based = false
		c := e.cellOfNode(peer)
		// Pass everything from the next tick on, until it reports again.
		// Old ticks keep the versions they were rendered under: their
		// answers go to downstreams that still need what those versions
		// passed, and a pubend that restarted has them back from its log.
		e.refilter(c)
		for _, ps := range e.streams {
			if o := ps.out(c); o != nil {
				o.ForgetReleased(peer)
				// A restarted downstream is heard from afresh. What was made
				// final without it stays skipped: an IB restarts without its
				// subtree, whose brokers still stand where they stood
				// (resync.go); a restarted SHB asks for nothing it does not
				// need.
				o.Gone, o.Heard = false, false
				if len(e.membersOf(c)) == 1 {
					o.C.Clear() // its curiosity is gone with it
				} else {
					delete(o.ByMember, peer)
				}
			}
		}
		// Until it reports again our union is all: say so upstream now, or
		// the last summary stays in force there while the restarted
		// downstream, whose union may be all, has nothing to send
		// (seed 10457).
		e.reportSummary()
	}
	for _, ps := range e.streams {
		if o := ps.out(e.cellOfNode(peer)); o != nil && e.capped(o) {
			o.ResyncAt = 0 // what it was sent while the link was down is lost
			e.resyncDown(ps, o)
		}
	}
	isUp := false
	for _, ps := range e.streams {
		if ps.up != e.cellOfNode(peer) {
			continue
		}
		isUp = true
		if ps.in.AckPrefix > 0 {
			e.sendAck(ps)
		}
		if ps.isSubend() && ps.sub.FloorSet {
			// Nacks sent while the link was down are lost: send them again
			// now instead of after their backoff (stream.Subend.Retry).
			ps.sub.Retry()
			e.scanGaps(ps)
		}
	}
	if !isUp {
		return
	}
	if e.up.started {
		e.sendSummary(peer)
	}
	for _, ps := range e.streams {
		// A SubReq sent while the link was down is lost: ask again now.
		if a := &ps.subAsk; a.id != "" && ps.up == e.cellOfNode(peer) {
			a.at = e.now
			e.send(peer, msg.SubReq{Pubend: ps.id, Sub: a.id, Path: []msg.NodeID{e.id}})
		}
	}
}
