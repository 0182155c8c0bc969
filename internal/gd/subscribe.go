package gd

import (
	"fmt"
	"slices"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func (e *Engine) localRequest(m msg.Msg) error {
	switch m := m.(type) {
	case msg.Publish:
		e.publish(m)
	case *msg.Publish: // one of a PublishRun, not boxed again (shell session.go)
		e.publish(*m)
	case msg.Subscribe:
		e.subscribe(m)
	case msg.Unsubscribe:
		e.unsubscribe(m.Sub)
	case msg.SubConsumed:
		e.consumed(m)
	default:
		return fmt.Errorf("gd: broker %s: unexpected local request %T", e.id, m)
	}
	return nil
}

// publish assigns a tick and queues the event record; the ack waits for the
// record's fsync (docs/ARCHITECTURE.md "The core contract"), and the event flows downstream only once it
// is durable (Advance), so nothing unlogged is ever seen.
func (e *Engine) publish(m msg.Publish) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || ps.pub == nil {
		e.toClient(msg.PubReject{Publisher: m.Publisher, Seq: m.Seq, Reason: fmt.Sprintf("pubend %q is not hosted at broker %s", m.Pubend, e.id)})
		return
	}
	if e.cfg.BestEffort {
		e.publishBestEffort(ps, m)
		return
	}
	if e.admitPublish(ps, m) {
		e.assign(ps, m)
	}
}

// assign gives a publish its tick and queues its record and ack.
func (e *Engine) assign(ps *pstream, m msg.Publish) {
	a := ps.pub.Assign(e.now, m)
	if a.Event == nil {
		e.stats.DuplicatePublishes++
		if a.DupDurable && e.acks(m) {
			e.toClient(msg.PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq, Tick: a.DupTick, Duplicate: true})
		}
		return // a pending original acks when durable
	}
	e.queuedRecs = append(e.queuedRecs, msg.Record{Pubend: ps.id, Event: a.Event})
	if e.acks(m) { // a fire-and-forget publish: logged all the same, never acked
		e.queuedAfter = append(e.queuedAfter, e.pubAckMsg(msg.PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq, Tick: a.Event.Tick}))
	}
	ps.cc.position = a.Event.Tick
}

// acks reports whether publish m gets a PubAck: unless it asked for none
// (msg.Publish.NoAck).
func (e *Engine) acks(m msg.Publish) bool { return !m.NoAck || e.mut&MutAckNoAck != 0 }

// subscribe widens the filters towards every pubend, then asks each pubend
// for the tick from which the subscription is complete (docs/CONCEPTS.md P6). The
// summary and the SubReq travel the same FIFO links, so every filter on the
// path is widened before the pubend picks the start.
func (e *Engine) subscribe(m msg.Subscribe) {
	pat, err := match.ParsePattern(m.Pattern)
	if err != nil {
		e.toClient(msg.SubRejected{Sub: m.Sub, Reason: err.Error()})
		return
	}
	// The selector filters at every edge on the way up (through the
	// summaries) and again here, where the subscription's own clause
	// decides delivery.
	var sel *match.Selector
	if m.Selector != "" {
		if sel, err = match.ParseSelector(m.Selector); err != nil {
			e.toClient(msg.SubRejected{Sub: m.Sub, Reason: err.Error()})
			return
		}
	}
	if _, dup := e.subByID[m.Sub]; dup {
		e.toClient(msg.SubRejected{Sub: m.Sub, Reason: "subscription id already in use"})
		return
	}
	if why := e.checkTotal(m); why != "" {
		e.toClient(msg.SubRejected{Sub: m.Sub, Reason: why})
		return
	}
	e.nextSlot++
	s := &subscription{slot: e.nextSlot, id: m.Sub, pat: pat, sel: sel, start: map[msg.PubendID]tick.Tick{}, pending: map[msg.PubendID]tick.Time{}}
	e.initDurable(s, m)
	if m.TotalOrder {
		e.startTotal(s)
	}
	e.subByID[m.Sub] = s
	s.pos = len(e.subs)
	e.subs = append(e.subs, s)
	e.index.Add(s.slot, pat, sel)
	e.bySlot[s.slot] = s
	k, c := localClause(s)
	e.up.ref(k, c, +1)
	e.reportSummary()
	for _, ps := range e.streams {
		if ps.isSubend() || ps.pub != nil || len(ps.subs) > 0 {
			// already a subend (or the pubend): nothing to set up
		} else if ps.in.K.KnownHi() > 0 {
			ps.sub.FloorSet = true // an IB turning subend keeps what it knows
		}
		if ps.subs == nil {
			ps.subs = map[*subscription]bool{}
		}
		ps.subs[s] = true
		if ps.pub != nil {
			s.start[ps.id] = max(ps.pub.Announced, ps.pub.Next-1, ps.delivered)
			continue
		}
		s.pending[ps.id] = e.now
		e.askStart(ps, s)
	}
	e.maybeStarted(s)
}

// subAsk is the SubReq for one pubend that this broker has out for its
// local subscriptions. Subscriptions made together share one request
// (simulator: a million subscriptions made a hundred million SubReq and
// SubReply hops, most of a large run's steps): the answer is the pubend's
// tick when the request reached it, and a request covers every
// subscription whose summary left before it, since both travel the same
// FIFO links. A subscription made while a request is out waits for the
// next one, sent when the answer comes: the answer to the request out may
// have been decided before its clause reached the pubend.
type subAsk struct {
	id      msg.SubID       // names the request: its first member's id
	members []*subscription // the subscriptions it asks for
	waiting []*subscription // made since it left: the next request's
	at      tick.Time       // when it was last sent (repeated after NRT)
}

// askStart asks ps's pubend for s's start: with the request out if none is
// out yet, else with the next one.
func (e *Engine) askStart(ps *pstream, s *subscription) {
	a := &ps.subAsk
	if a.id != "" {
		a.waiting = append(a.waiting, s)
		return
	}
	e.sendSubAsk(ps, []*subscription{s})
}

// sendSubAsk sends one SubReq for the subscriptions ss that still wait for
// ps's start, if any.
func (e *Engine) sendSubAsk(ps *pstream, ss []*subscription) {
	live := ss[:0]
	for _, s := range ss {
		if _, ok := s.pending[ps.id]; ok && e.subByID[s.id] == s {
			live = append(live, s)
		}
	}
	clear(ss[len(live):])
	ps.subAsk = subAsk{}
	if len(live) == 0 {
		return
	}
	ps.subAsk = subAsk{id: live[0].id, members: live, at: e.now}
	e.sendUp(ps, msg.SubReq{Pubend: ps.id, Sub: live[0].id, Path: []msg.NodeID{e.id}})
}

// repeatSubAsks sends again, after NRT, the SubReqs not answered yet (a
// lost message, an upstream restarted or a member that does not serve).
func (e *Engine) repeatSubAsks() {
	for _, ps := range e.streams {
		a := &ps.subAsk
		if a.id == "" || e.now.Sub(a.at) < e.cfg.NackRepetitionMin {
			continue
		}
		a.at = e.now
		e.sendUp(ps, msg.SubReq{Pubend: ps.id, Sub: a.id, Path: []msg.NodeID{e.id}})
	}
}

func (e *Engine) maybeStarted(s *subscription) {
	if s.started || len(s.pending) > 0 {
		return
	}
	// In force now: from here on every pubend delivers past the token, so
	// each start is lifted to what this broker has already delivered.
	s.started = true
	e.subsGen++ // a resync's answer in flight lacks its clause (resync.go)
	tok := msg.Token{}
	for _, ps := range e.streams {
		if t, ok := s.start[ps.id]; ok {
			t = max(t, ps.delivered)
			s.start[ps.id] = t
			tok[ps.id] = t
		}
	}
	if s.dur != nil {
		e.startDurable(s, tok) // start tokens and catch-up (durable.go)
	}
	e.toClient(msg.SubStarted{Sub: s.id, Token: tok})
	if s.dur != nil {
		e.kickReplays(s)
	}
}

func (e *Engine) unsubscribe(id msg.SubID) {
	s := e.subByID[id]
	if s == nil {
		return
	}
	delete(e.subByID, id)
	e.dropDurable(s)
	e.dropTotal(s)
	e.index.Remove(s.slot)
	delete(e.bySlot, s.slot)
	e.dropSub(s)
	for _, ps := range e.streams {
		delete(ps.subs, s)
		e.updateAck(ps)
	}
	// Narrow the filters upstream to what the remaining subscriptions need.
	k, c := localClause(s)
	e.up.ref(k, c, -1)
	e.reportSummary()
}

// onSubReq forwards a subscription request towards the pubend, or answers it
// there with the highest tick decided so far: every later tick passes
// filters that already admit the subscription.
func (e *Engine) onSubReq(from msg.NodeID, m msg.SubReq) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || e.outFrom(ps, from) == nil {
		e.stats.Stale++
		return
	}
	if ps.pub == nil {
		path := append(slices.Clone(m.Path), e.id)
		e.sendUp(ps, msg.SubReq{Pubend: m.Pubend, Sub: m.Sub, Path: path})
		return
	}
	if len(m.Path) == 0 {
		return
	}
	start := max(ps.pub.Announced, ps.pub.Next-1)
	last := len(m.Path) - 1
	e.sendAfterPersist(m.Path[last], msg.SubReply{Pubend: m.Pubend, Sub: m.Sub, Start: start, Path: slices.Clone(m.Path[:last])})
}

// onSubReply walks a reply back down its path; at the subscriber's broker the
// subscription starts at max(pubend's tick, what is already delivered here).
func (e *Engine) onSubReply(from msg.NodeID, m msg.SubReply) {
	if ps := e.pstreamOf(m.Pubend); ps != nil {
		e.answeredUp(ps, from)
	}
	if last := len(m.Path) - 1; last >= 0 {
		e.send(m.Path[last], msg.SubReply{Pubend: m.Pubend, Sub: m.Sub, Start: m.Start, Path: slices.Clone(m.Path[:last])})
		return
	}
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || ps.subAsk.id == "" || ps.subAsk.id != m.Sub {
		return // a repeat's second answer, or a request from before a restart
	}
	a := ps.subAsk
	e.startTogether(func() {
		for _, s := range a.members {
			if _, ok := s.pending[m.Pubend]; !ok || e.subByID[s.id] != s {
				continue // ended meanwhile
			}
			delete(s.pending, m.Pubend)
			s.start[m.Pubend] = max(m.Start, ps.delivered, ps.in.K.Final())
			e.maybeStarted(s)
		}
	})
	e.sendSubAsk(ps, a.waiting)
}

// matches reports whether ev is for this subscription: its topic matches
// the pattern and its properties satisfy the selector (TRUE, not UNKNOWN).
func (s *subscription) matches(ev *msg.Event) bool {
	return s.pat.MatchTopic(ev.Topic) && (s.sel == nil || s.sel.Match(ev.Topic, ev.Props))
}

// dropSub takes s out of e.subs in O(1), keeping the others' order.
func (e *Engine) dropSub(s *subscription) {
	e.subs[s.pos] = nil
	e.subHoles++
	if e.subHoles*2 < len(e.subs) {
		return
	}
	live := e.subs[:0]
	for _, x := range e.subs {
		if x != nil {
			x.pos = len(live)
			live = append(live, x)
		}
	}
	clear(e.subs[len(live):])
	e.subs, e.subHoles = live, 0
}
