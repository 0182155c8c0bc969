package gd

import (
	"fmt"
	"slices"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// onSummary installs downstream c's filter on every ostream towards c. Within
// c's lifetime summaries only widen; after c restarts a narrower one is right,
// because c's new streams know nothing that the old filter produced.
func (e *Engine) onSummary(from msg.NodeID, m msg.Summary) {
	d := e.downs[from]
	if d == nil {
		e.stats.Stale++
		return
	}
	d.filter = unionOf(m)
	e.refilter(e.cellOfNode(from))
	e.reportSummary()
}

// reportSummary tells upstream neighbours the union of local subscriptions
// and downstream filters whenever it changed; while some downstream has not
// reported, the union is all. It widens
// when a subscription arrives and narrows when one leaves (MODEL.md P6): the
// upstream applies each version only to ticks above what it already knows
// (Ostream.SetFilter), so no tick is ever told two ways, and a narrower
// union still covers every subscription that remains.
func (e *Engine) reportSummary() {
	if len(e.ups) == 0 {
		return
	}
	u := &match.Union{}
	u.Merge(&e.local)
	for _, d := range e.downs {
		if d.filter == nil {
			// A downstream that has not reported (or restarted) may need
			// anything: report all rather than keep the last summary in
			// force upstream, which would miss what was added since
			// (seed 5958: a SubReq overtook the widening it needed).
			u.AddAll()
			break
		}
		u.Merge(d.filter)
	}
	if e.reported != nil && e.reported.Equal(u) {
		return
	}
	if e.reported == nil && u.IsAll() {
		return // upstreams pass everything until a first summary
	}
	e.reported = u
	for _, up := range e.ups {
		e.send(up, e.summaryMsg())
	}
}

func (e *Engine) summaryMsg() msg.Summary {
	m := msg.Summary{All: e.reported.IsAll()}
	m.Patterns, m.Selectors = e.reported.Clauses()
	if !slices.ContainsFunc(m.Selectors, func(s string) bool { return s != "" }) {
		m.Selectors = nil
	}
	return m
}

// unionOf turns a neighbour's summary into the filter of the edge towards
// it. A clause this broker cannot parse widens the edge to pass everything:
// never filter out what the neighbour may need.
func unionOf(m msg.Summary) *match.Union {
	u := &match.Union{}
	if m.All {
		u.AddAll()
		return u
	}
	for i, src := range m.Patterns {
		p, err := match.ParsePattern(src)
		if err != nil {
			u.AddAll()
			return u
		}
		var sel *match.Selector
		if i < len(m.Selectors) && m.Selectors[i] != "" {
			if sel, err = match.ParseSelector(m.Selectors[i]); err != nil {
				u.AddAll()
				return u
			}
		}
		u.AddClause(p, sel)
	}
	return u
}

func (e *Engine) localRequest(m msg.Msg) error {
	switch m := m.(type) {
	case msg.Publish:
		e.publish(m)
	case msg.Subscribe:
		e.subscribe(m)
	case msg.Unsubscribe:
		e.unsubscribe(m.Sub)
	default:
		return fmt.Errorf("gd: broker %s: unexpected local request %T", e.id, m)
	}
	return nil
}

// publish assigns a tick and queues the event record; the ack waits for the
// record's fsync (DESIGN.md §3), and the event flows downstream only once it
// is durable (Advance), so nothing unlogged is ever seen.
func (e *Engine) publish(m msg.Publish) {
	ps := e.byPubend[m.Pubend]
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
		if a.DupDurable {
			e.toClient(msg.PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq, Tick: a.DupTick, Duplicate: true})
		}
		return // a pending original acks when durable
	}
	e.queuedRecs = append(e.queuedRecs, msg.Record{Pubend: ps.id, Event: a.Event})
	e.queuedAfter = append(e.queuedAfter, msg.PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq, Tick: a.Event.Tick})
	ps.cc.position = a.Event.Tick
}

// subscribe widens the filters towards every pubend, then asks each pubend
// for the tick from which the subscription is complete (MODEL.md P6). The
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
	e.nextSlot++
	s := &subscription{slot: e.nextSlot, id: m.Sub, pat: pat, sel: sel, start: map[msg.PubendID]tick.Tick{}, pending: map[msg.PubendID]tick.Time{}}
	e.initDurable(s, m)
	e.subByID[m.Sub] = s
	e.subs = append(e.subs, s)
	e.index.Add(s.slot, pat, sel)
	e.bySlot[s.slot] = s
	if e.local.AddClause(pat, sel) {
		e.reportSummary()
	}
	for _, ps := range e.streams {
		if ps.isSubend() || ps.pub != nil || len(ps.subs) > 0 {
			// already a subend (or the pubend): nothing to set up
		} else if ps.in.K.KnownHi() > 0 {
			ps.sub.FloorSet = true // an IB turning subend keeps what it knows
		}
		ps.subs = append(ps.subs, s)
		if ps.pub != nil {
			s.start[ps.id] = max(ps.pub.Announced, ps.pub.Next-1, ps.delivered)
			continue
		}
		s.pending[ps.id] = e.now
		e.sendUp(ps, msg.SubReq{Pubend: ps.id, Sub: s.id, Path: []msg.NodeID{e.id}})
	}
	e.maybeStarted(s)
}

func (e *Engine) maybeStarted(s *subscription) {
	if s.started || len(s.pending) > 0 {
		return
	}
	// In force now: from here on every pubend delivers past the token, so
	// each start is lifted to what this broker has already delivered.
	s.started = true
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
	e.index.Remove(s.slot)
	delete(e.bySlot, s.slot)
	e.subs = slices.DeleteFunc(e.subs, func(x *subscription) bool { return x == s })
	for _, ps := range e.streams {
		ps.subs = slices.DeleteFunc(ps.subs, func(x *subscription) bool { return x == s })
		e.updateAck(ps)
	}
	// Narrow the filters upstream to what the remaining subscriptions need.
	e.local = match.Union{}
	for _, x := range e.subs {
		e.local.AddClause(x.pat, x.sel)
	}
	e.reportSummary()
}

// onSubReq forwards a subscription request towards the pubend, or answers it
// there with the highest tick decided so far: every later tick passes
// filters that already admit the subscription.
func (e *Engine) onSubReq(from msg.NodeID, m msg.SubReq) {
	ps := e.byPubend[m.Pubend]
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
	e.send(m.Path[last], msg.SubReply{Pubend: m.Pubend, Sub: m.Sub, Start: start, Path: slices.Clone(m.Path[:last])})
}

// onSubReply walks a reply back down its path; at the subscriber's broker the
// subscription starts at max(pubend's tick, what is already delivered here).
func (e *Engine) onSubReply(from msg.NodeID, m msg.SubReply) {
	if last := len(m.Path) - 1; last >= 0 {
		e.send(m.Path[last], msg.SubReply{Pubend: m.Pubend, Sub: m.Sub, Start: m.Start, Path: slices.Clone(m.Path[:last])})
		return
	}
	s := e.subByID[m.Sub]
	ps := e.byPubend[m.Pubend]
	if s == nil || ps == nil {
		return
	}
	if _, ok := s.pending[m.Pubend]; !ok {
		return
	}
	delete(s.pending, m.Pubend)
	s.start[m.Pubend] = max(m.Start, ps.delivered, ps.in.K.Final())
	e.maybeStarted(s)
}

// matches reports whether ev is for this subscription: its topic matches
// the pattern and its properties satisfy the selector (TRUE, not UNKNOWN).
func (s *subscription) matches(ev *msg.Event) bool {
	return s.pat.MatchTopic(ev.Topic) && (s.sel == nil || s.sel.Match(ev.Topic, ev.Props))
}
