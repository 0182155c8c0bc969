// Package oracle checks the invariants of docs/CONCEPTS.md "Invariants" against what a network
// actually did: the events its pubends logged, the acks publishers got, the
// knowledge brokers sent, the state of every stream, and what every
// subscriber received. The simulator feeds it after every step; real-process
// tests feed it from client observations.
package oracle

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Violation is one broken invariant.
type Violation struct {
	Invariant string // "I1" … "I14", "M1" … "M3"
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Oracle accumulates observations and the violations they reveal.
type Oracle struct {
	logs     map[msg.PubendID]*pubLog
	acks     map[pubKey]tick.Tick
	sessions map[msg.SubID]*Session
	// streams and releases are the last states seen per broker
	// incarnation, in the engine's order (by pubend), for I8 and I10
	// (release.go): one map lookup per step, not one per pubend.
	streams    map[nodeInc][]gd.StreamState
	releases   map[nodeInc][]gd.ReleaseState
	finals     map[msg.PubendID]tick.Tick // highest L prefix of each pubend (durable.go)
	downs      map[downKey]downSeen       // when each downstream's ack prefix last moved (checkGone)
	violations []Violation
	viewAt     map[member.ID]member.View // last view installed per member incarnation (M1, F1)
	left       map[member.ID]bool        // incarnations that left gracefully (M4)
	byes       map[[2]member.ID]bool     // {leaver, receiver}: the leaver's Bye arrived (M4)
	// MaxViolations bounds how many are kept (the first ones matter).
	MaxViolations int
	// SampleEvery > 1 makes all but one session in SampleEvery compact
	// (compact.go): for runs with too many subscriptions to check each
	// in full. Set it before the first session starts.
	SampleEvery int
	started     int
	pubIdx      map[msg.PubendID]int
	selectors   map[string]*match.Selector
	// ordered are the publishers whose events must be logged in the order
	// of their seqs (I13).
	ordered map[string]bool
	// noAcks are the publishes sent to a pubend's broker asking for no
	// ack (msg.Publish.NoAck): acking one breaks I9.
	noAcks    map[pubKey]bool
	byNode    map[msg.NodeID][]*Session // full sessions, for Converged
	delivered int                       // deliveries checked
}

type pubKey struct {
	p   msg.PubendID
	pub string
	seq uint64
}

type nodeInc struct {
	node msg.NodeID
	inc  int
}

// prevState finds pubend p's previous state in prevs, at index i when the
// engine's streams are as before (always, within one incarnation).
func prevState[S any](prevs []S, i int, p msg.PubendID, pubend func(*S) msg.PubendID) (*S, bool) {
	if i < len(prevs) && pubend(&prevs[i]) == p {
		return &prevs[i], true
	}
	for j := range prevs {
		if pubend(&prevs[j]) == p {
			return &prevs[j], true
		}
	}
	return nil, false
}

type pubLog struct {
	events    map[tick.Tick]*msg.Event
	ticks     []tick.Tick // sorted
	bySeq     map[pubKey]tick.Tick
	announced tick.Tick // highest tick the pubend ever sent knowledge about
	// latest is, per ordered publisher, its event logged at the highest
	// tick (I13).
	latest map[string]*msg.Event
}

// Session is one subscription as its subscriber saw it.
type Session struct {
	ID       msg.SubID
	Node     msg.NodeID
	Pattern  match.Pattern
	Selector *match.Selector // nil: none
	Start    msg.Token
	Last     map[msg.PubendID]tick.Tick
	Count    int
	Ended    bool
	// Durable: a durable subscriber's session, checked from its checkpoint
	// (durable.go); Gaps counts the gap notices it got.
	Durable bool
	Gaps    int
	// Total: a subscription in uniform total order across pubends (I4);
	// lastTotal is the (tick, pubend) of its latest delivery.
	Total     bool
	lastTotal totalKey
	Order     []string // a total-order session's deliveries, "pubend@tick"

	// c holds a compact session's state (compact.go); nil for a full one,
	// whose Start and Last are then set.
	c *compactState
}

// New returns an empty oracle.
func New() *Oracle {
	return &Oracle{
		logs: map[msg.PubendID]*pubLog{}, acks: map[pubKey]tick.Tick{},
		sessions: map[msg.SubID]*Session{}, streams: map[nodeInc][]gd.StreamState{},
		MaxViolations: 20,
	}
}

// Violations returns what was found so far.
func (o *Oracle) Violations() []Violation { return o.violations }

func (o *Oracle) fail(inv, format string, args ...any) {
	if len(o.violations) < o.MaxViolations {
		o.violations = append(o.violations, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
}

func (o *Oracle) log(p msg.PubendID) *pubLog {
	l := o.logs[p]
	if l == nil {
		l = &pubLog{events: map[tick.Tick]*msg.Event{}, bySeq: map[pubKey]tick.Tick{}}
		o.logs[p] = l
	}
	return l
}

// Logged records that ev is durable at its pubend (its fsync completed, or it
// was recovered from the log after a restart).
func (o *Oracle) Logged(ev *msg.Event) {
	l := o.log(ev.Pubend)
	if old, ok := l.events[ev.Tick]; ok {
		if !old.Equal(ev) {
			o.fail("I9", "pubend %s tick %d logged twice with different events: %v then %v", ev.Pubend, ev.Tick, old, ev)
		}
		return
	}
	if ev.Tick <= l.announced {
		o.fail("I9", "pubend %s reused tick %d for %v after announcing up to %d", ev.Pubend, ev.Tick, ev, l.announced)
	}
	k := pubKey{ev.Pubend, ev.Publisher, ev.Seq}
	if t, ok := l.bySeq[k]; ok {
		o.fail("I9", "publish %s#%d logged twice on %s: ticks %d and %d", ev.Publisher, ev.Seq, ev.Pubend, t, ev.Tick)
	}
	l.bySeq[k] = ev.Tick
	l.events[ev.Tick] = ev
	o.checkOrdered(l, ev)
	i, _ := slices.BinarySearch(l.ticks, ev.Tick)
	l.ticks = slices.Insert(l.ticks, i, ev.Tick)
}

// Ordered says publisher sends its publishes in order and resends the
// unacknowledged ones in order before any new one, as the Go client does:
// its events must be logged in the order of its seqs (I13, client publish
// order; docs/REPLICATION.md "Clients").
func (o *Oracle) Ordered(publisher string) {
	if o.ordered == nil {
		o.ordered = map[string]bool{}
	}
	o.ordered[publisher] = true
}

// checkOrdered checks I13 for ev, logged for the first time: an ordered
// publisher's event above its latest has a higher seq. (A pubend logs in
// tick order, so its events are seen in that order.)
func (o *Oracle) checkOrdered(l *pubLog, ev *msg.Event) {
	if !o.ordered[ev.Publisher] {
		return
	}
	if l.latest == nil {
		l.latest = map[string]*msg.Event{}
	}
	last := l.latest[ev.Publisher]
	if last != nil && ev.Tick < last.Tick {
		return // seen out of tick order: the seqs are checked from the latest on
	}
	if last != nil && ev.Seq < last.Seq {
		o.fail("I13", "publisher %s's #%d logged at %s tick %d after its #%d at tick %d: want its publish order",
			ev.Publisher, ev.Seq, ev.Pubend, ev.Tick, last.Seq, last.Tick)
	}
	l.latest[ev.Publisher] = ev
}

// Recovered checks a restarted pubend's log: every event ever acked to a
// publisher must still be there (docs/CONCEPTS.md I9), unless the pubend had
// released it (every downstream acked it, docs/CONCEPTS.md I10) and retention
// dropped it: released is the recovered release point.
func (o *Oracle) Recovered(p msg.PubendID, events []*msg.Event, released tick.Tick) {
	have := map[tick.Tick]*msg.Event{}
	for _, ev := range events {
		have[ev.Tick] = ev
	}
	keys := make([]pubKey, 0)
	for k := range o.acks {
		if k.p == p {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return o.acks[keys[i]] < o.acks[keys[j]] })
	for _, k := range keys {
		t := o.acks[k]
		if t <= released {
			continue
		}
		if ev := have[t]; ev == nil || ev.Publisher != k.pub || ev.Seq != k.seq {
			o.fail("I9", "pubend %s lost acked publish %s#%d (tick %d) across a restart", p, k.pub, k.seq, t)
		}
	}
	for _, ev := range events {
		o.Logged(ev)
	}
}

// AskedNoAck records a publish sent to a broker, if it asks for no ack:
// no PubAck may answer it (I9). Not one that reaches its pubend through a
// forwarding member, which asks for the ack on the client's behalf.
func (o *Oracle) AskedNoAck(p msg.Publish) {
	if !p.NoAck {
		return
	}
	if o.noAcks == nil {
		o.noAcks = map[pubKey]bool{}
	}
	o.noAcks[pubKey{p.Pubend, p.Publisher, p.Seq}] = true
}

// NoAcks returns how many publishes were sent asking for no ack
// (AskedNoAck) and how many of them were logged; the others were lost, as
// such a publish may be.
func (o *Oracle) NoAcks() (asked, logged int) {
	for k := range o.noAcks {
		if _, ok := o.log(k.p).bySeq[k]; ok {
			logged++
		}
	}
	return len(o.noAcks), logged
}

// PubAcked checks an ack a publisher received: the event is durable, a
// retried publish is acked with its original tick, and the publish asked
// for an ack.
func (o *Oracle) PubAcked(a msg.PubAck) {
	k := pubKey{a.Pubend, a.Publisher, a.Seq}
	if o.noAcks[k] {
		o.fail("I9", "publish %s#%d asked for no ack and was acked at %s tick %d", a.Publisher, a.Seq, a.Pubend, a.Tick)
		return
	}
	if t, ok := o.acks[k]; ok && t != a.Tick {
		o.fail("I9", "publish %s#%d acked with tick %d and later %d", a.Publisher, a.Seq, t, a.Tick)
		return
	}
	o.acks[k] = a.Tick
	ev := o.log(a.Pubend).events[a.Tick]
	if ev == nil || ev.Publisher != a.Publisher || ev.Seq != a.Seq {
		o.fail("I9", "publish %s#%d acked at %s tick %d before it was durable", a.Publisher, a.Seq, a.Pubend, a.Tick)
	}
}

// Acked returns how many distinct publishes were acked.
func (o *Oracle) Acked() int { return len(o.acks) }

// Sent checks a knowledge message as it leaves a broker (docs/CONCEPTS.md I7): a D
// must be the logged event, and a pubend's silence may cover a logged event
// only when that event fails the filter of the edge it was sent through
// (filter nil: passes everything).
func (o *Oracle) Sent(from msg.NodeID, fromPubend bool, m msg.Knowledge, filterAt func(tick.Tick) match.Filter) {
	l := o.log(m.Pubend)
	if m.Event != nil {
		if ev := l.events[m.VTick]; ev == nil || !ev.Equal(m.Event) || m.Event.Tick != m.VTick {
			o.fail("I7", "%s sent D@%d on %s that is not the logged event (%v)", from, m.VTick, m.Pubend, m.Event)
		}
	}
	if !fromPubend || m.Start > m.End {
		return
	}
	// Ticks at or below Final are L: a range there says nothing.
	i, _ := slices.BinarySearch(l.ticks, max(m.Start, m.Final+1))
	for ; i < len(l.ticks) && l.ticks[i] <= m.End; i++ {
		t := l.ticks[i]
		if m.Event != nil && t == m.VTick {
			continue
		}
		if ev, filter := l.events[t], filterAt(t); filter == nil || filter.Match(ev.Topic, ev.Props) {
			o.fail("I7", "pubend %s announced silence over logged event %v that passes the edge's filter (message %v)", m.Pubend, ev, m)
			break
		}
	}
	l.announced = max(l.announced, m.End)
}

// Started opens a subscriber session at its start token; selector may be
// empty.
func (o *Oracle) Started(id msg.SubID, node msg.NodeID, pattern, selector string, tok msg.Token) {
	o.startSession(id, node, pattern, selector, tok, true)
}

// StartedTotal opens the session of a subscription in uniform total
// order across pubends (docs/CONCEPTS.md I4): besides everything a session is
// checked for, its deliveries must come in (tick, pubend) order, so any
// two such sessions see their common events in the same order.
func (o *Oracle) StartedTotal(id msg.SubID, node msg.NodeID, pattern, selector string, tok msg.Token) {
	o.startSession(id, node, pattern, selector, tok, false)
	if s := o.sessions[id]; s != nil {
		s.Total = true
	}
}

// totalKey orders a total-order session's deliveries.
type totalKey struct {
	t tick.Tick
	p msg.PubendID
}

func (k totalKey) less(o totalKey) bool { return k.t < o.t || k.t == o.t && k.p < o.p }

// startSession opens a session; a compact one (compact.go) only if
// mayCompact.
func (o *Oracle) startSession(id msg.SubID, node msg.NodeID, pattern, selector string, tok msg.Token, mayCompact bool) {
	p, err := match.ParsePattern(pattern)
	if err != nil {
		o.fail("I1", "session %s started with bad pattern %q", id, pattern)
		return
	}
	var sel *match.Selector
	if selector != "" {
		if sel, err = o.selectorOf(selector); err != nil {
			o.fail("I1", "session %s started with bad selector %q: %v", id, selector, err)
			return
		}
	}
	o.started++
	if mayCompact && o.SampleEvery > 1 && o.started%o.SampleEvery != 0 {
		o.sessions[id] = &Session{ID: id, Node: node, Pattern: p, Selector: sel, c: o.compactFrom(tok)}
		return
	}
	last := map[msg.PubendID]tick.Tick{}
	for k, v := range tok {
		last[k] = v
	}
	s := &Session{ID: id, Node: node, Pattern: p, Selector: sel, Start: tok, Last: last}
	o.sessions[id] = s
	if o.byNode == nil {
		o.byNode = map[msg.NodeID][]*Session{}
	}
	o.byNode[node] = append(o.byNode[node], s)
}

// Ended closes a session (its broker crashed or it unsubscribed).
func (o *Oracle) Ended(id msg.SubID) {
	if s := o.sessions[id]; s != nil {
		s.Ended = true
	}
}

// Delivered checks one delivery: no phantom (I1), at most once and in pubend
// order (I2, I3), and nothing skipped since the previous one (I5).
func (o *Oracle) Delivered(id msg.SubID, ev *msg.Event) {
	o.delivered++
	s := o.sessions[id]
	if s == nil {
		o.fail("I5", "delivery to %s before its subscription was in force: %v", id, ev)
		return
	}
	if s.Ended {
		o.fail("I2", "delivery to ended session %s: %v", id, ev)
		return
	}
	l := o.log(ev.Pubend)
	if logged := l.events[ev.Tick]; logged == nil || !logged.Equal(ev) {
		o.fail("I1", "%s got %v, which is not in the log of %s", id, ev, ev.Pubend)
		return
	}
	if !s.wants(ev) {
		o.fail("I1", "%s (%s) got non-matching %v", id, s.Pattern, ev)
	}
	if s.c != nil {
		o.deliveredCompact(s, ev)
		return
	}
	last, ok := s.Last[ev.Pubend]
	if !ok {
		o.fail("I5", "%s got %v from a pubend missing from its start token", id, ev)
		return
	}
	if ev.Tick <= last {
		o.fail("I2", "%s got %s@%d after %d (duplicate or out of order)", id, ev.Pubend, ev.Tick, last)
		return
	}
	if miss := o.firstMatch(l, s, last, ev.Tick); miss != nil {
		inv := "I5"
		if s.Durable {
			inv = "I6" // across sessions, from the subscriber's checkpoint
		}
		o.fail(inv, "%s skipped %v (got %s@%d after %d)", id, miss, ev.Pubend, ev.Tick, last)
	}
	if s.Total {
		k := totalKey{ev.Tick, ev.Pubend}
		if s.Count > 0 && !s.lastTotal.less(k) {
			o.fail("I4", "%s (total order) got %s@%d after %s@%d", id, ev.Pubend, ev.Tick, s.lastTotal.p, s.lastTotal.t)
		}
		s.lastTotal = k
		s.Order = append(s.Order, fmt.Sprintf("%s@%d", ev.Pubend, ev.Tick))
	}
	s.Last[ev.Pubend] = ev.Tick
	s.Count++
}

// wants reports whether the session's filter f_s admits ev.
func (s *Session) wants(ev *msg.Event) bool {
	return s.Pattern.MatchTopic(ev.Topic) && (s.Selector == nil || s.Selector.Match(ev.Topic, ev.Props))
}

// firstMatch returns the first logged event in (lo, hi) that s wants.
func (o *Oracle) firstMatch(l *pubLog, s *Session, lo, hi tick.Tick) *msg.Event {
	i, _ := slices.BinarySearch(l.ticks, lo+1)
	for ; i < len(l.ticks) && l.ticks[i] < hi; i++ {
		if ev := l.events[l.ticks[i]]; s.wants(ev) {
			return ev
		}
	}
	return nil
}

// CheckStreams checks a broker's stream states after a step (docs/CONCEPTS.md I8:
// prefixes and horizons never move back within one incarnation; P1: no
// contradiction was ever joined; I14: an SHB's payloads stay within its
// budget).
func (o *Oracle) CheckStreams(node msg.NodeID, inc int, states []gd.StreamState, stats gd.Stats) {
	if stats.FetchMisses > 0 || stats.FetchErrors > 0 {
		// An evicted payload the log could not give back is a lost event.
		o.fail("I9", "%s could not read %d evicted payloads back from its log (%d read errors)", node, stats.FetchMisses, stats.FetchErrors)
	}
	if stats.Contradictions > 0 {
		o.fail("I7", "%s joined %d contradictory knowledge values: %s", node, stats.Contradictions, stats.FirstContradiction)
	}
	for _, st := range states {
		if !st.Hosted && st.Downstreams == 0 && st.ParkedNacks == 0 && st.Cached > st.CacheBudget {
			o.fail("I14", "%s %s holds %d payload bytes after a step, past its budget of %d", node, st.Pubend, st.Cached, st.CacheBudget)
		}
	}
	k := nodeInc{node, inc}
	prevs := o.streams[k]
	for i, st := range states {
		prev, ok := prevState(prevs, i, st.Pubend, func(s *gd.StreamState) msg.PubendID { return s.Pubend })
		if ok {
			switch {
			case st.Final < prev.Final:
				o.fail("I8", "%s %s final prefix moved back %d -> %d", node, st.Pubend, prev.Final, st.Final)
			case st.AckPrefix < prev.AckPrefix:
				o.fail("I8", "%s %s ack prefix moved back %d -> %d", node, st.Pubend, prev.AckPrefix, st.AckPrefix)
			case st.DoubtHorizon < prev.DoubtHorizon:
				o.fail("I8", "%s %s doubt horizon moved back %d -> %d", node, st.Pubend, prev.DoubtHorizon, st.DoubtHorizon)
			case st.Delivered < prev.Delivered:
				o.fail("I8", "%s %s delivery point moved back %d -> %d", node, st.Pubend, prev.Delivered, st.Delivered)
			}
		}
	}
	o.streams[k] = append(prevs[:0], states...)
}

// Converged checks liveness once faults have stopped (docs/CONCEPTS.md I11, with I5
// in full): every live session at node has received every matching logged
// event up to its broker's delivery point, and that point has passed target
// (the pubend's decided prefix when faults stopped).
func (o *Oracle) Converged(node msg.NodeID, states []gd.StreamState, target map[msg.PubendID]tick.Tick) {
	ids := make([]string, 0)
	for _, s := range o.byNode[node] {
		if o.sessions[s.ID] == s && !s.Ended {
			ids = append(ids, string(s.ID))
		}
	}
	sort.Strings(ids)
	// A total-order session is owed only what every pubend has delivered
	// (the merged doubt horizon, docs/CONCEPTS.md "Doubt horizon").
	merged := tick.Max
	for _, st := range states {
		merged = min(merged, st.Delivered)
	}
	for _, st := range states {
		if t, ok := target[st.Pubend]; ok && st.Delivered < t && !st.Hosted {
			o.fail("I11", "%s %s delivery point %d has not reached %d after healing", node, st.Pubend, st.Delivered, t)
		}
		l := o.log(st.Pubend)
		for _, id := range ids {
			s := o.sessions[msg.SubID(id)]
			last, ok := s.Last[st.Pubend]
			if !ok {
				continue
			}
			owed := st.Delivered
			if s.Total {
				owed = min(owed, merged)
			}
			if miss := o.firstMatch(l, s, last, owed+1); miss != nil {
				o.fail("I11", "%s never got %v (delivered to tick %d at %s)", id, miss, last, node)
			}
		}
	}
}

// Sessions returns the sessions seen, sorted by id.
func (o *Oracle) Sessions() []*Session {
	out := make([]*Session, 0, len(o.sessions))
	for _, s := range o.sessions {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Violate records a violation found by a caller's own check (the simulator's
// end-of-run liveness checks).
func (o *Oracle) Violate(inv, format string, args ...any) { o.fail(inv, format, args...) }

// LoggedAt returns the event pubend p logged at tick t, or nil.
func (o *Oracle) LoggedAt(p msg.PubendID, t tick.Tick) *msg.Event {
	if l := o.logs[p]; l != nil {
		return l.events[t]
	}
	return nil
}

// LoggedTicks calls fn with every logged event, by pubend in tick order.
func (o *Oracle) LoggedTicks(fn func(ev *msg.Event)) {
	for _, p := range slices.Sorted(maps.Keys(o.logs)) {
		l := o.logs[p]
		for _, t := range l.ticks {
			fn(l.events[t])
		}
	}
}
