package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// onNack handles curiosity from downstream c (seed 000 §3.1 "Propagation and
// Consolidation of C Ticks"): ticks this broker knows are answered at once;
// the rest become C in ostream[P,c] and in istream[P], and only the ticks
// that were not already C in the istream go further upstream.
func (e *Engine) onNack(from msg.NodeID, m msg.Nack) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || m.Start > m.End {
		e.stats.Stale++
		return
	}
	o := e.outFrom(ps, from)
	if o == nil {
		e.stats.Stale++
		return
	}
	o.Nacker = from
	e.stats.NacksReceived++
	e.resyncDown(ps, o) // a downstream back from gone (resync.go)
	e.answerNack(ps, o, from, tick.Range{Lo: m.Start, Hi: m.End}, false)
}

// answerNack answers, records and forwards a nack for r from o's
// downstream. A nack that reaches payloads evicted from memory waits for
// them: the pubend reads them back from its log (cache.go), another broker
// asks upstream (refetch.go); after
// such a read (fetched), ticks whose payload the log did not return are
// left for downstream to nack again.
func (e *Engine) answerNack(ps *pstream, o *stream.Ostream, from msg.NodeID, r tick.Range, fetched bool) {
	if e.mut&MutSkipFetch == 0 {
		if need := missing(ps, r); len(need) > 0 {
			if !fetched || !ps.cache.fetchedAll(need) {
				e.park(ps, from, r, need)
				return
			}
			e.stats.FetchMisses++
			return
		}
	}
	if ps.pub != nil {
		// The pubend decides the present on demand, so that a nack beyond
		// the last announcement (DCT, AckExpected) is answered with silence
		// up to now.
		e.announce(ps, nil)
	}
	if e.mut&MutExactNackAnswers == 0 {
		r.Hi = silentRunEnd(&ps.in.K, r.Hi)
	}
	e.render(ps, o, r, true, from)
	ps.in.K.VisitQ(r, o.C.Add)
	if by := e.curiousBy(o, from); by != nil {
		ps.in.K.VisitQ(r, by.Add)
	}
	if !o.Fresh && ps.pub != nil {
		// Ticks the pubend has not decided yet are answered through C when
		// they are; never again as first-time (see Ostream.SentHi).
		o.SentHi = max(o.SentHi, r.Hi)
	}
	if ps.pub != nil || e.mut&MutDropNackForward != 0 {
		return // Q ticks at the pubend are in its future: answered once decided
	}
	for _, f := range ps.in.MarkCurious(r, e.now) {
		e.sendNack(ps, f)
	}
}

// nacksLost re-sends at once, through another member of the upstream cell,
// the nacks that may have gone to peer, whose link just failed: a nack goes
// to the member that last sent for its pubend (seed 000 §3.1, "Link
// Bundles"), and its answer is lost with the link. Without this the nack
// would wait for its repetition (NRT, backed off), or, at an IB, for the
// forgetting interval and the downstream's repetition. A subend retries its
// gaps; an IB forwards again the curiosity it holds for its downstreams.
// With no other live member there is nowhere to send: LinkUp retries.
func (e *Engine) nacksLost(peer msg.NodeID) {
	c := e.cellOfNode(peer)
	if !slices.ContainsFunc(e.membersOf(c), func(m msg.NodeID) bool { return e.live[m] }) {
		return
	}
	for _, ps := range e.streams {
		if ps.up != c || ps.pub != nil {
			continue
		}
		if ps.isSubend() {
			if ps.sub.FloorSet {
				ps.sub.Retry()
				e.scanGaps(ps)
			}
			continue
		}
		for _, r := range ps.in.C.Ranges() {
			e.sendNack(ps, r)
		}
	}
}

// nackChunksMax bounds the chunks one nack range is split into: the rest
// of the range goes as one last nack. A subend whose floor is 0 and whose
// upstream has said nothing yet (a replicated PHB cell still electing its
// first leader) has a gap from tick 1 to now, 56 years of 600 ms chunks:
// split in full it never returns (simulator seed 48, faults "replicas").
const nackChunksMax = 64

// sendNack sends a nack for r upstream, split into chunks (docs/CONCEPTS.md P7).
func (e *Engine) sendNack(ps *pstream, r tick.Range) {
	chunk := ticksOf(e.cfg.NackChunk)
	for n, lo := 1, r.Lo; lo <= r.Hi; n++ {
		hi := r.Hi
		if hi-lo >= chunk && n < nackChunksMax {
			hi = lo + chunk - 1
		}
		e.sendUp(ps, msg.Nack{Pubend: ps.id, Start: lo, End: hi})
		e.stats.NacksSent++
		e.stats.NackTicksSent += uint64(hi-lo) + 1
		if hi == tick.Max {
			break
		}
		lo = hi + 1
	}
}

// onAck turns [0,T] anti-curious in ostream[P,c] (seed 000 §3.1).
func (e *Engine) onAck(from msg.NodeID, m msg.Ack) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil {
		return
	}
	o := e.outFrom(ps, from)
	if o == nil {
		e.stats.Stale++
		return
	}
	if m.T == 0 {
		// An ack of nothing: a restarted broker whose durable subscribers
		// hold the release before it knows any tick. Its release values
		// (0 = its ack prefix) would read as "reported, nothing held" and
		// release what those subscribers need (seed 1794); until it acks a
		// tick it stays unheard from (Ostream.Reported).
		return
	}
	moved := !o.Reported
	o.Reported = true
	if c := m.Clean(); c > o.CleanAck {
		o.CleanAck, moved = c, true
	}
	if m.T > o.AckPrefix {
		if o.Gone {
			// What was made final while it was gone stays skipped for it,
			// however far that went since the last Final move.
			noteSkipped(ps)
		}
		o.AckPrefix = m.T
		heardFrom(o, e.now)
		o.C.RemoveBelow(m.T)
		for _, by := range o.ByMember {
			by.RemoveBelow(m.T)
		}
		moved = true
	}
	// The release values of the subtree (Gryphon DS, DSN 2003 §3): released
	// is the lowest of the members' latest reports (Ostream.ReleasedBy);
	// delivered, like the ack prefix, the highest any member reported.
	if o.ReportReleased(from, m.Released) {
		moved = true
	}
	if m.Delivered > o.Delivered {
		o.Delivered, moved = m.Delivered, true
	}
	if moved {
		e.updateAck(ps)
		e.ackIfNowHeld(ps) // a subtree that now holds tells upstream at once
		if ps.pub != nil {
			e.evict(ps) // what every downstream acked needs no payload here (ackedByAll)
		}
	}
	e.resyncDown(ps, o)
}

// updateAck moves istream[P]'s anti-curious prefix as far as every ostream
// (and local delivery) allows. Ticks behind it are no longer needed here:
// they become final, which bounds this broker's memory. At the pubend the
// release protocol decides what becomes L (release.go, docs/CONCEPTS.md I10):
// without durable subscribers that is the ack prefix too. The ack itself
// goes upstream on the next tick, at most every AckInterval (docs/CONCEPTS.md P11).
func (e *Engine) updateAck(ps *pstream) {
	e.vouchAll(ps)
	t := stream.NextAckPrefix(&ps.in, ps.outs, len(ps.subs) > 0, ps.delivered)
	if e.mut&MutAckBeforeDeliver != 0 && ps.isSubend() {
		t = max(t, ps.in.K.KnownHi()) // broken on purpose: acks what it has not delivered
	}
	if t > ps.in.AckPrefix {
		ps.in.AckPrefix = t
		defer noteSkipped(ps) // after the release moved a pubend's L
		if ps.pub == nil && ps.in.K.SetFinal(t) {
			ps.in.C.RemoveBelow(t)
			ps.delivered = max(ps.delivered, t)
			ps.cache.release(ps.in.K.Final())
		}
		if ps.pub != nil {
			ps.aeBackoff = 0 // progress: AckExpected starts over at AET
		}
	}
	e.updateRelease(ps)
}

// onAckExpected: the pubend expects ticks up to T acked (seed 000 §3.2). A
// broker already acked that far answers with its ack (docs/CONCEPTS.md P10);
// otherwise the message goes down every path not acked up to T, and a subend
// nacks its Q ticks up to T at once.
func (e *Engine) onAckExpected(from msg.NodeID, m msg.AckExpected) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || ps.pub != nil || e.cellOfNode(from) != ps.up {
		return
	}
	if ps.isSubend() && !ps.sub.FloorSet {
		e.setFloor(ps, m.T) // a fresh stream does not need the past
		e.updateAck(ps)
	}
	if ps.in.AckPrefix >= m.T {
		e.sendAck(ps)
		return
	}
	for _, o := range ps.outs {
		if o.AckPrefix < m.T {
			e.sendDown(ps.id, o.Down, m)
		}
	}
	if ps.isSubend() {
		ps.sub.Expect(m.T)
		e.scanGaps(ps)
	}
}

func (e *Engine) sendAck(ps *pstream) {
	e.updateRelease(ps)
	if ps.in.AckPrefix == 0 {
		return // an ack of nothing: upstream ignores it (onAck)
	}
	r := &ps.rel
	t, d := ps.in.AckPrefix, r.delivered
	if h := e.ackToSend(ps); h < t {
		t, d = h, min(d, h) // nor has it delivered past it
	}
	u := t - e.cleanAck(ps, t)
	e.sendUpAll(ps, msg.Ack{Pubend: ps.id, T: t, Released: min(r.ackReleased(t), d), Delivered: d, Unvouched: u})
	ps.ackSent, ps.ackSentAt, ps.unvouchedSent = t, e.now, u
	r.relSent, r.delSent, r.heldSent = r.released, r.delivered, r.held
}

// scanGaps lets the subend nack gaps that are due.
func (e *Engine) scanGaps(ps *pstream) {
	l := stream.Liveness{GCT: e.cfg.GapCuriosityThreshold, NRTMin: e.cfg.NackRepetitionMin, NRTMax: e.cfg.NackRepetitionMax}
	for _, r := range ps.sub.Scan(&ps.in.K, e.now, l) {
		e.sendNack(ps, r)
	}
}

// silentRunEnd returns the last tick of the silence known here that runs on
// from t, when t itself is silent (S or L); else t. A nack answered up to
// the end of that run costs one message more of silence and no event, and
// saves the downstream a round trip per NACK window through it: a
// recovering SHB (Gryphon CC §3.2) whose subscription starts at the
// pubend's final prefix would otherwise crawl through the pubend's whole
// early-release bound (maxRetain, seven days by default) of silence, a
// window at a time (simulator seed 3067).
func silentRunEnd(k *tick.Knowledge[*msg.Event], t tick.Tick) tick.Tick {
	if kind, _ := k.Get(t); kind != tick.S && kind != tick.L {
		return t
	}
	end := t
	k.Visit(tick.Range{Lo: t + 1, Hi: k.KnownHi()}, func(r tick.Range, kind tick.Kind, _ *msg.Event) bool {
		if r.Lo != end+1 || kind == tick.D {
			return false
		}
		end = r.Hi
		return true
	})
	return end
}
