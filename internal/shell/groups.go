package shell

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/group"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Consumer groups at their home (docs/CONCEPTS.md "Consumer groups").
//
// A group is one durable subscription of this broker's, named
// GroupPrefix+name in the durable state (durable.go: its filter and its
// checkpoint are records in the log, and it holds the release floor like
// any durable subscription), whose subscriber is not a connection but the
// group's dispatcher (internal/group): the engine delivers the
// subscription's events to the dispatcher, which hands each to one member.
// The group's checkpoint is the dispatcher's acknowledged prefix. While the
// group has no member its subscription is away (the engine delivers
// nothing); the first member to join attaches it again from the
// checkpoint, and the dispatcher drops what it holds already.

// GroupPrefix starts the durable name of a group's subscription: a client's
// durable subscription may not use it.
const GroupPrefix = "group:"

// GroupHome is a broker that may be a group's home: its id and the
// addresses its clients connect to.
type GroupHome struct {
	ID      msg.NodeID
	Clients string
	MQTT    string // its MQTT listener, "" for none
}

// groupHome is the home of group name (ok false: this broker serves it).
func (b *Broker) groupHome(name string) (GroupHome, bool) {
	if len(b.homes) == 0 {
		return GroupHome{}, false
	}
	ids := make([]string, len(b.homes))
	for i, h := range b.homes {
		ids[i] = string(h.ID)
	}
	h := b.homes[group.Home(name, ids)]
	return h, h.ID != b.id
}

// groupState is one group with members here, or had since this broker
// started.
type groupState struct {
	name    string
	disp    *group.Dispatcher
	engine  msg.SubID // the subscription's engine id while attached
	attach  int       // attachments so far: each gets an engine id of its own
	members map[group.MemberID]memberRef
	// backlog: put away because more than groupBacklog events waited for
	// a member with room; attached again once the members have room.
	backlog bool
	// told is what was last reported taken to the engine (SubConsumed):
	// the subscription's catch-up goes at the members' pace. report: a
	// report is due (the engine delivered since, or what is handed out
	// moved); it goes once per burst (reportGroups).
	told   msg.Token
	report bool
}

// groupBacklog bounds the events a group's dispatcher holds waiting for a
// member with room: past it the subscription is put away and those events
// dropped, to come again from the pubend's log, paced, once the members
// have room (group.Dispatcher.DropPending).
const groupBacklog = 10000

type memberRef struct {
	c   ClientID
	sub msg.SubID // the member's name for its subscription
}

type memberKey struct {
	c   ClientID
	sub msg.SubID
}

type groups struct {
	byName   map[string]*groupState
	byEngine map[msg.SubID]*groupState
	members  map[memberKey]*groupState
	dirty    []*groupState // whose checkpoint moved since the last save
	reports  []*groupState // with a report of what was taken due
}

func newGroups() groups {
	return groups{byName: map[string]*groupState{}, byEngine: map[msg.SubID]*groupState{}, members: map[memberKey]*groupState{}}
}

// Groups returns the groups with members here, and their members' counts.
func (b *Broker) Groups() map[string]int {
	out := map[string]int{}
	for n, g := range b.groups.byName {
		if len(g.members) > 0 {
			out[n] = len(g.members)
		}
	}
	return out
}

// GroupName checks a group's name: printable, no spaces or slashes.
func GroupName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a group needs a name")
	case strings.ContainsAny(name, " \t\n/"):
		return fmt.Errorf("group name %q: no spaces or slashes", name)
	}
	return nil
}

func memberID(c ClientID, sub msg.SubID) group.MemberID {
	return group.MemberID(fmt.Sprintf("%d/%s", c, sub))
}

// joinGroup makes subscription m.Sub of connection c a member of group
// m.Group, creating the group if new.
func (b *Broker) joinGroup(c ClientID, s *session, m msg.Subscribe) {
	reject := func(why string) { b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: why}) }
	switch {
	case m.Durable || len(m.From) > 0 || m.TotalOrder:
		reject(fmt.Sprintf("group %s: a member's subscription is neither durable nor total order and has no start token: "+
			"the group keeps its own checkpoint", m.Group))
		return
	case b.dur == nil:
		reject(fmt.Sprintf("broker %s keeps no data, so it cannot hold groups (give it a data directory)", b.id))
		return
	}
	if err := GroupName(m.Group); err != nil {
		reject(err.Error())
		return
	}
	if h, elsewhere := b.groupHome(m.Group); elsewhere {
		reject(msg.GroupElsewhere(m.Group, h.ID, h.Clients, h.MQTT))
		return
	}
	k := memberKey{c, m.Sub}
	if _, dup := b.groups.members[k]; dup {
		reject(fmt.Sprintf("this connection already has a subscription named %s", m.Sub))
		return
	}
	if _, dup := s.subs[b.engineSub(c, m.Sub)]; dup {
		reject(fmt.Sprintf("this connection already has a subscription named %s", m.Sub))
		return
	}
	dn := GroupPrefix + m.Group
	d := b.durables.subs[dn]
	if d != nil && d.cur.Name != "" && !d.cur.Deleted && (d.cur.Pattern != m.Pattern || d.cur.Selector != m.Selector) {
		reject(fmt.Sprintf("group %s has topic %q selector %q at broker %s; this member asks for topic %q selector %q: "+
			"every member of a group has the group's filter (delete the group first, aerie sub --group NAME --delete, or use another name)",
			m.Group, d.cur.Pattern, d.cur.Selector, b.id, m.Pattern, m.Selector))
		return
	}
	if d == nil {
		d = &durableSub{}
		b.durables.subs[dn] = d
	}
	g := b.groups.byName[m.Group]
	if d.cur.Name == "" || d.cur.Deleted { // new, or again under a deleted one's name
		d.cur = msg.DurableSub{Name: dn, Pattern: m.Pattern, Selector: m.Selector}
		b.saveDurable(d)
		g = nil // a deleted group's memory goes with it
	}
	if g == nil {
		g = &groupState{name: m.Group, disp: group.New(group.Config{}, d.cur.Released), members: map[group.MemberID]memberRef{}}
		b.groups.byName[m.Group] = g
	}
	id := memberID(c, m.Sub)
	g.members[id] = memberRef{c: c, sub: m.Sub}
	b.groups.members[k] = g
	b.net.ToClient(c, msg.SubStarted{Sub: m.Sub, Token: maps.Clone(d.cur.Released)})
	g.disp.Join(id)
	if g.engine == "" {
		b.attachGroup(g, d)
	}
	b.flushGroup(g)
}

// attachGroup subscribes the group's durable subscription from its
// checkpoint.
func (b *Broker) attachGroup(g *groupState, d *durableSub) {
	g.attach++
	g.engine = b.engineSub(0, msg.SubID(fmt.Sprintf("%s%s#%d", GroupPrefix, g.name, g.attach)))
	b.groups.byEngine[g.engine] = g
	d.starting = b.startingHolds(d.cur.Released)
	b.applyFloors()
	var from msg.Token
	if len(d.cur.Released) > 0 {
		from = maps.Clone(d.cur.Released)
	}
	g.backlog, g.told = false, nil
	b.step(gd.Local{Msg: msg.Subscribe{Sub: g.engine, Pattern: d.cur.Pattern, Selector: d.cur.Selector, Durable: true, From: from, Paced: true}})
}

// detachGroup puts the group's subscription away: it keeps its place and
// its floor, and the dispatcher what it holds.
func (b *Broker) detachGroup(g *groupState) {
	if g.engine == "" {
		return
	}
	delete(b.groups.byEngine, g.engine)
	b.step(gd.Local{Msg: msg.Unsubscribe{Sub: g.engine}})
	g.engine = ""
	if d := b.durables.subs[GroupPrefix+g.name]; d != nil && d.starting != nil {
		d.starting = nil
		b.applyFloors()
	}
}

// leaveGroup: member sub of connection c leaves its group; what it had not
// acknowledged goes to the other members.
func (b *Broker) leaveGroup(c ClientID, sub msg.SubID) bool {
	k := memberKey{c, sub}
	g := b.groups.members[k]
	if g == nil {
		return false
	}
	delete(b.groups.members, k)
	id := memberID(c, sub)
	delete(g.members, id)
	g.disp.Leave(id)
	if len(g.members) == 0 {
		b.detachGroup(g)
		g.backlog = false
	}
	b.flushGroup(g)
	return true
}

// leaveGroups: connection c is gone, and its memberships with it.
func (b *Broker) leaveGroups(c ClientID) {
	var subs []msg.SubID
	for k := range b.groups.members {
		if k.c == c {
			subs = append(subs, k.sub)
		}
	}
	slices.Sort(subs)
	for _, sub := range subs {
		b.leaveGroup(c, sub)
	}
}

// ackGroup: a member acknowledges single events, one per pubend of the
// token. It reports whether m was a member's.
func (b *Broker) ackGroup(c ClientID, m msg.SubAck) bool {
	g := b.groups.members[memberKey{c, m.Sub}]
	if g == nil {
		return false
	}
	id := memberID(c, m.Sub)
	for _, p := range slices.Sorted(maps.Keys(m.Token)) {
		g.disp.Ack(id, p, m.Token[p])
	}
	b.flushGroup(g)
	return true
}

// deleteGroup ends group name for good, if no member is connected here.
func (b *Broker) deleteGroup(c ClientID, name string) {
	g := b.groups.byName[name]
	if g != nil && len(g.members) > 0 {
		b.net.ToClient(c, msg.SubRejected{Sub: msg.SubID(GroupPrefix + name), Reason: fmt.Sprintf(
			"group %s has %d members connected to broker %s: it is deleted only when it has none", name, len(g.members), b.id)})
		return
	}
	delete(b.groups.byName, name)
	if d := b.durables.subs[GroupPrefix+name]; d != nil && !d.cur.Deleted {
		b.unsubscribeDurable(d)
	}
}

// toGroup hands the dispatcher an engine answer for a group's
// subscription; it reports whether m was one.
func (b *Broker) toGroup(m msg.Msg) bool {
	var sub msg.SubID
	switch x := m.(type) {
	case *msg.Delivery:
		sub = x.Sub
	case msg.Delivery:
		sub = x.Sub
	case msg.SubStarted:
		sub = x.Sub
	case msg.SubRejected:
		sub = x.Sub
	case msg.Gap:
		sub = x.Sub
	case msg.Progress:
		sub = x.Sub
	default:
		return false
	}
	g := b.groups.byEngine[sub]
	if g == nil {
		return false
	}
	switch x := m.(type) {
	case *msg.Delivery:
		g.disp.Event(x.Event)
		b.reportDue(g)
	case msg.Delivery:
		g.disp.Event(x.Event)
		b.reportDue(g)
	case msg.SubStarted:
		if d := b.durables.subs[GroupPrefix+g.name]; d != nil {
			b.startedAt(d, x.Token)
		}
		g.disp.Start(x.Token)
	case msg.Progress:
		for _, p := range slices.Sorted(maps.Keys(x.Token)) {
			g.disp.Progress(p, x.Token[p])
		}
	case msg.Gap:
		// What the gap covers is gone for the group: every member is told.
		g.disp.Progress(x.Pubend, x.To)
		for _, id := range g.disp.Members() {
			r := g.members[id]
			b.toMember(r.c, msg.Gap{Sub: r.sub, Pubend: x.Pubend, From: x.From, To: x.To})
		}
	case msg.SubRejected:
		for _, id := range slices.Sorted(maps.Keys(g.members)) {
			r := g.members[id]
			b.toMember(r.c, msg.SubRejected{Sub: r.sub, Reason: x.Reason})
			delete(b.groups.members, memberKey{r.c, r.sub})
			g.disp.Leave(id)
		}
		clear(g.members)
		delete(b.groups.byEngine, g.engine)
		g.engine = ""
	}
	b.flushGroup(g)
	return true
}

// flushGroup sends the dispatcher's deliveries and notes a moved
// checkpoint for the next save.
func (b *Broker) flushGroup(g *groupState) {
	for _, dl := range g.disp.Ready() {
		r, ok := g.members[dl.To]
		if !ok {
			continue
		}
		b.toMember(r.c, &msg.Delivery{Sub: r.sub, Event: dl.Event})
	}
	d := b.durables.subs[GroupPrefix+g.name]
	if d == nil || d.cur.Deleted {
		return
	}
	switch {
	case g.engine != "" && g.disp.Pending() > groupBacklog:
		b.detachGroup(g)
		g.disp.DropPending()
		g.backlog = true
	case g.engine == "" && g.backlog && len(g.members) > 0 && g.disp.Room() >= group.DefaultMaxUnacked/2:
		b.attachGroup(g, d)
	}
	if g.engine != "" && tokenAbove(g.disp.Handed(), g.told) {
		b.reportDue(g)
	}
	rel := g.disp.Released()
	if !tokenAbove(rel, d.cur.Released) {
		return
	}
	merged := maps.Clone(d.cur.Released)
	if merged == nil {
		merged = msg.Token{}
	}
	for p, t := range rel {
		if cur, ok := merged[p]; !ok || t > cur {
			merged[p] = t
		}
	}
	d.cur.Released = merged
	if !slices.Contains(b.groups.dirty, g) {
		b.groups.dirty = append(b.groups.dirty, g)
	}
}

// reportDue notes that g's engine subscription is owed a report of what
// was taken: every event the engine delivers counts in its catch-up
// window until a report covers it, also one the dispatcher already held
// (a catch-up from the checkpoint sends those again) and so did not move
// what is handed out.
func (b *Broker) reportDue(g *groupState) {
	if !g.report {
		g.report = true
		b.groups.reports = append(b.groups.reports, g)
	}
}

// reportGroups tells the engine what each group with a report due has
// handed out (msg.SubConsumed): once per burst, however many events.
func (b *Broker) reportGroups() {
	rs := b.groups.reports
	b.groups.reports = nil
	for _, g := range rs {
		g.report = false
		if g.engine == "" {
			continue
		}
		h := g.disp.Handed()
		g.told = h
		b.step(gd.Local{Msg: msg.SubConsumed{Sub: g.engine, Token: h}})
	}
}

// tokenAbove reports whether a names a pubend above b's tick for it, or
// one b lacks.
func tokenAbove(a, b msg.Token) bool {
	for p, t := range a {
		if cur, ok := b[p]; !ok || t > cur {
			return true
		}
	}
	return false
}

// toMember sends m to member connection c after what is open for it, so
// that it receives everything in order.
func (b *Broker) toMember(c ClientID, m msg.Msg) {
	if b.acks.open > 0 {
		b.flushAcks(c, true)
	}
	b.flushDeliveries(b.sessions[c])
	b.net.ToClient(c, m)
}

// saveGroups writes the checkpoints of the groups whose prefix moved: one
// record per group per batch, however many acknowledgements moved it.
func (b *Broker) saveGroups() {
	for _, g := range b.groups.dirty {
		if d := b.durables.subs[GroupPrefix+g.name]; d != nil && !d.cur.Deleted {
			b.saveDurable(d)
		}
	}
	b.groups.dirty = b.groups.dirty[:0]
}

// GroupAttachments is how many times group name's subscription was
// attached since this broker started (at a member's join after none, and
// after a backlog put it away).
func (b *Broker) GroupAttachments(name string) int {
	if g := b.groups.byName[name]; g != nil {
		return g.attach
	}
	return 0
}
