package shell

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Durable subscriptions at their SHB (Gryphon DS, DSN 2003 §3–§4.1).
//
// A durable subscription outlives its connection: the SHB keeps, in its
// log, the subscription's clause and released(s,p) — the checkpoint token
// its subscriber last acknowledged — and holds every pubend back at the
// minimum of those over all its durable subscriptions, connected or away
// (the release floor, gd.ReleaseFloor), so that a subscriber that comes back
// with its token can have everything after it replayed. The engine does the
// delivering and the catch-up; this file keeps the state and the floor.
//
// Lowering a floor is safe at once (it only holds more back); raising one —
// an acknowledgement, a deletion — takes effect only once the record that
// justifies it is durable, so a crash can never leave the pubend released
// past what a restarted SHB believes its subscribers still need.

// durableSub is one durable subscription held here.
type durableSub struct {
	cur       msg.DurableSub // the latest state, maybe not yet durable
	persisted msg.DurableSub // the state as of the last record made durable
	known     bool           // persisted holds a durable record
	client    ClientID       // the connection it is attached to; 0: away
	engine    msg.SubID      // its engine id while attached
	// starting holds, until the engine says where the subscription starts
	// (durableStarted), each pubend it has no position for at what this
	// broker had delivered when it subscribed: the start lies above that,
	// and without a hold the broker would report released (and its pubends
	// discard) ticks above the start that the subscriber has not
	// acknowledged. Not persisted: a subscriber that never learned its start
	// comes back without a token and starts afresh.
	starting msg.Token
}

type durables struct {
	subs   map[string]*durableSub
	floors map[msg.PubendID]tick.Tick // the floors last handed to the engine
}

func newDurables() durables {
	return durables{subs: map[string]*durableSub{}, floors: map[msg.PubendID]tick.Tick{}}
}

// Durables returns the durable subscriptions held here, by name, and
// whether each is attached to a connection now.
func (b *Broker) Durables() map[string]bool {
	out := map[string]bool{}
	for name, d := range b.durables.subs {
		if !d.cur.Deleted {
			out[name] = d.client != 0
		}
	}
	return out
}

// DurablesUnder returns the durable subscriptions held here whose names
// start with prefix, as last asked for (not necessarily durable yet),
// sorted by name: an MQTT persistent session is the set of durable
// subscriptions under its client id (docs/MQTT.md).
func (b *Broker) DurablesUnder(prefix string) []msg.DurableSub {
	var out []msg.DurableSub
	for _, name := range b.durablesUnder(prefix) {
		st := b.durables.subs[name].cur
		st.Released = maps.Clone(st.Released)
		out = append(out, st)
	}
	return out
}

// DurablyReleased returns the checkpoints of the durable subscriptions
// under prefix as the log has them (durable), for those it has: what a
// restart resumes from at the least.
func (b *Broker) DurablyReleased(prefix string) map[msg.SubID]msg.Token {
	out := map[msg.SubID]msg.Token{}
	for name, d := range b.durables.subs {
		if d.known && !d.persisted.Deleted && strings.HasPrefix(name, prefix) {
			out[msg.SubID(name)] = maps.Clone(d.persisted.Released)
		}
	}
	return out
}

// DeleteDurables ends for good every durable subscription whose name
// starts with prefix, attached or away, releasing what they held (an MQTT
// session that is cleaned or expires).
func (b *Broker) DeleteDurables(prefix string) {
	for _, name := range b.durablesUnder(prefix) {
		b.unsubscribeDurable(b.durables.subs[name])
	}
}

// durablesUnder lists the live durable subscriptions under prefix, sorted.
func (b *Broker) durablesUnder(prefix string) []string {
	var names []string
	for name, d := range b.durables.subs {
		if !d.cur.Deleted && strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// durableName checks a durable subscription's name: it names the
// subscription across connections and brokers, so it must be printable.
func durableName(sub msg.SubID) error {
	switch {
	case sub == "":
		return fmt.Errorf("a durable subscription needs a name")
	case strings.ContainsAny(string(sub), " \t\n/"):
		return fmt.Errorf("durable subscription name %q: no spaces or slashes", sub)
	case strings.HasPrefix(string(sub), GroupPrefix):
		return fmt.Errorf("durable subscription name %q: names starting with %q are the groups' (aerie sub --group)", sub, GroupPrefix)
	}
	return nil
}

// subscribeDurable attaches durable subscription m.Sub to connection c,
// creating it if new. A name attached elsewhere is taken over: the newer
// connection wins and the older one is told why. With no token, a known
// subscription resumes from what it last acknowledged here; asked for
// under another topic pattern or selector, it is refused, naming both.
func (b *Broker) subscribeDurable(c ClientID, s *session, m msg.Subscribe) {
	if b.dur == nil {
		b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: fmt.Sprintf(
			"broker %s keeps no data, so it cannot hold durable subscriptions (give it a data directory)", b.id)})
		return
	}
	if err := durableName(m.Sub); err != nil {
		b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: err.Error()})
		return
	}
	name := string(m.Sub)
	d := b.durables.subs[name]
	if d != nil && d.cur.Name != "" && !d.cur.Deleted && (d.cur.Pattern != m.Pattern || d.cur.Selector != m.Selector) {
		// Resuming under another filter would silently drop what the
		// subscriber missed that no longer matches: the subscriber
		// deletes the subscription, or picks another name.
		b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: fmt.Sprintf(
			"durable subscription %s has topic %q selector %q at broker %s; this request asks for topic %q selector %q: "+
				"delete the subscription first (aerie sub --durable NAME --delete), or use another name", name, d.cur.Pattern, d.cur.Selector, b.id, m.Pattern, m.Selector)})
		return
	}
	if d == nil {
		d = &durableSub{}
		b.durables.subs[name] = d
	}
	if d.client != 0 {
		b.detachDurable(d, fmt.Sprintf("durable subscription %s was taken over by a newer connection", name))
	}
	from := m.From
	if d.cur.Name == "" || d.cur.Deleted { // new, or again under a deleted one's name
		d.cur = msg.DurableSub{Name: name, Pattern: m.Pattern, Selector: m.Selector}
	} else if len(from) == 0 {
		from = maps.Clone(d.cur.Released)
	}
	if len(from) > 0 {
		d.cur.Released = lowered(d.cur.Released, from)
	}
	full := b.engineSub(c, m.Sub)
	s.subs[full] = m.Sub
	b.subOwner.set(full, c)
	d.client, d.engine = c, full
	d.starting = b.startingHolds(d.cur.Released)
	b.saveDurable(d)
	b.step(gd.Local{Msg: msg.Subscribe{Sub: full, Pattern: m.Pattern, Selector: m.Selector, Durable: true, From: from, Paced: s.reportsTaken}})
}

// lowered returns rel with every pubend of from set to from's tick: the
// subscriber says it has consumed only that much.
func lowered(rel, from msg.Token) msg.Token {
	out := maps.Clone(rel)
	if out == nil {
		out = msg.Token{}
	}
	maps.Copy(out, from)
	return out
}

// durableStarted: the engine says where the subscription starts; pubends
// it had no position for are released up to there.
func (b *Broker) durableStarted(full msg.SubID, tok msg.Token) {
	if d := b.attached(full); d != nil {
		b.startedAt(d, tok)
	}
}

// startedAt: durable subscription d starts at tok.
func (b *Broker) startedAt(d *durableSub, tok msg.Token) {
	rel := maps.Clone(d.cur.Released)
	if rel == nil {
		rel = msg.Token{}
	}
	changed := false
	for p, t := range tok {
		if _, ok := rel[p]; !ok {
			rel[p], changed = t, true
		}
	}
	d.starting = nil
	if changed {
		d.cur.Released = rel
		b.saveDurable(d)
	} else {
		b.applyFloors()
	}
}

// startingHolds returns, for every pubend routed here that rel has no
// position for, what this broker has delivered of it (durableSub.starting).
func (b *Broker) startingHolds(rel msg.Token) msg.Token {
	var out msg.Token
	for _, st := range b.eng.Inspect() {
		if _, ok := rel[st.Pubend]; !ok {
			if out == nil {
				out = msg.Token{}
			}
			out[st.Pubend] = st.Delivered
		}
	}
	return out
}

// ackDurable: the subscriber on connection c has consumed everything up to
// the token (Gryphon DS §2: it acknowledges by presenting its checkpoint).
// Acknowledgements only move forward.
func (b *Broker) ackDurable(c ClientID, m msg.SubAck) {
	d := b.durables.subs[string(m.Sub)]
	if d == nil || d.client != c {
		return // not attached here: another connection took it over
	}
	rel := maps.Clone(d.cur.Released)
	if rel == nil {
		rel = msg.Token{}
	}
	changed := false
	for p, t := range m.Token {
		if cur, ok := rel[p]; !ok || t > cur {
			rel[p], changed = t, true
		}
	}
	if changed {
		d.cur.Released = rel
		b.saveDurable(d)
	}
}

// consumedDurable: the client on connection c has taken everything of a
// durable subscription up to the token; the engine paces the
// subscription's catch-up by it (gd/durable.go). Nothing is released: that
// is SubAck's, for what the application has saved.
func (b *Broker) consumedDurable(c ClientID, m msg.SubConsumed) {
	d := b.durables.subs[string(m.Sub)]
	if d == nil || d.client != c {
		return // not attached here: another connection took it over
	}
	b.step(gd.Local{Msg: msg.SubConsumed{Sub: d.engine, Token: m.Token}})
}

// unsubscribeDurable ends durable subscription d for good.
func (b *Broker) unsubscribeDurable(d *durableSub) {
	if d.client != 0 {
		b.detachDurable(d, "")
	}
	d.cur = msg.DurableSub{Name: d.cur.Name, Deleted: true}
	b.saveDurable(d)
}

// detachDurable ends d's attachment to its connection (which closed, or
// lost it to a newer one: then it is told why); d stays, away.
func (b *Broker) detachDurable(d *durableSub, why string) {
	c, full := d.client, d.engine
	d.client, d.engine = 0, ""
	if s := b.sessions[c]; s != nil {
		name := s.subs[full]
		delete(s.subs, full)
		if why != "" {
			b.net.ToClient(c, msg.SubRejected{Sub: name, Reason: why})
		}
	}
	b.subOwner.delete(full)
	b.step(gd.Local{Msg: msg.Unsubscribe{Sub: full}})
	if d.starting != nil {
		d.starting = nil // it never learned its start: it starts afresh
		b.applyFloors()
	}
}

// attached returns the durable subscription the engine knows as full.
func (b *Broker) attached(full msg.SubID) *durableSub {
	c, ok := b.subOwner.get(full)
	if !ok {
		return nil
	}
	s := b.sessions[c]
	if s == nil {
		return nil
	}
	d := b.durables.subs[string(s.subs[full])]
	if d == nil || d.engine != full {
		return nil
	}
	return d
}

// saveDurable queues d's current state for the log and lowers the floors
// at once if it asks for less than they allow.
func (b *Broker) saveDurable(d *durableSub) {
	st := d.cur
	st.Released = maps.Clone(st.Released)
	b.ownRecs = append(b.ownRecs, msg.Record{Durable: &st})
	b.applyFloors()
}

// durablesPersisted: these records of the shell's are durable.
func (b *Broker) durablesPersisted(recs []msg.Record) {
	for _, r := range recs {
		if r.Durable == nil {
			continue
		}
		d := b.durables.subs[r.Durable.Name]
		if d == nil {
			continue
		}
		d.persisted, d.known = *r.Durable, true
		if d.persisted.Deleted && d.cur.Deleted && d.client == 0 {
			delete(b.durables.subs, r.Durable.Name)
		}
	}
	b.applyFloors()
}

// restoreDurables takes the durable records out of what a restart read,
// rebuilding the subscriptions (all away until their subscribers return);
// it returns the other records, for the engine.
func (b *Broker) restoreDurables(recs []msg.Record) []msg.Record {
	rest := recs[:0:0]
	for _, r := range recs {
		if r.Durable == nil {
			rest = append(rest, r)
			continue
		}
		if r.Durable.Deleted {
			delete(b.durables.subs, r.Durable.Name)
			continue
		}
		st := *r.Durable
		b.durables.subs[st.Name] = &durableSub{cur: st, persisted: st, known: true}
	}
	return rest
}

// durableSnapshot is the durable state a log snapshot must keep: one
// record per subscription, as persisted.
func (b *Broker) durableSnapshot() []msg.Record {
	names := slices.Sorted(maps.Keys(b.durables.subs))
	var out []msg.Record
	for _, n := range names {
		if d := b.durables.subs[n]; d.known && !d.persisted.Deleted {
			st := d.persisted
			out = append(out, msg.Record{Durable: &st})
		}
	}
	return out
}

// applyFloors hands the engine, per pubend, the lowest tick a durable
// subscription here still needs: the lower of what its durable state and
// its latest (not yet durable) state say. A pubend no durable
// subscription holds is cleared.
func (b *Broker) applyFloors() {
	want := map[msg.PubendID]tick.Tick{}
	hold := func(tok msg.Token) {
		for p, t := range tok {
			if cur, ok := want[p]; !ok || t < cur {
				want[p] = t
			}
		}
	}
	for _, d := range b.durables.subs {
		if !d.cur.Deleted {
			hold(d.cur.Released)
			hold(d.starting)
		}
		if d.known && !d.persisted.Deleted {
			hold(d.persisted.Released)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(b.durables.floors)) {
		if _, ok := want[p]; !ok {
			delete(b.durables.floors, p)
			b.step(gd.ReleaseFloor{Pubend: p, Clear: true})
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if cur, ok := b.durables.floors[p]; !ok || cur != want[p] {
			b.durables.floors[p] = want[p]
			b.step(gd.ReleaseFloor{Pubend: p, T: want[p]})
		}
	}
}
