// Package group is the pure core of a consumer group (competing consumers,
// docs/CONCEPTS.md "Consumer groups"): a Dispatcher receives the events of
// the group's one durable subscription in tick order per pubend and hands
// each to exactly one member, tracks what each member has not acknowledged,
// gives a departed member's unacknowledged events to the others, and keeps
// the group's checkpoint (Released) at the contiguous acknowledged prefix of
// each pubend.
//
// It is an input-output machine like gd.Engine: Start, Event, Progress,
// Join, Leave and Ack are its inputs; Ready returns the deliveries they
// caused. It holds no clock, socket or lock.
package group

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// MemberID names a member (the shell's connection and subscription name).
type MemberID string

// DefaultMaxUnacked bounds the events one member holds unacknowledged:
// past it the member gets nothing more until it acknowledges.
const DefaultMaxUnacked = 1000

// DefaultWindow bounds the events handed out above the group's
// checkpoint (out at members or acknowledged out of order): past it the
// next event waits until the checkpoint moves. It bounds what a crash of
// the home delivers again (docs/CONCEPTS.md "Consumer groups"), at the
// price that a member holding one event without acknowledging it stalls
// the group once the others are a window past it.
const DefaultWindow = 10000

// Delivery hands Event to member To. Again marks an event given to the
// group before, to a member that left without acknowledging it.
type Delivery struct {
	To    MemberID
	Event *msg.Event
	Again bool
}

type key struct {
	p msg.PubendID
	t tick.Tick
}

// entry is one event above its pubend's released prefix: pending (owner
// nil, not acked), out at a member, or acked out of order.
type entry struct {
	ev    *msg.Event
	owner *member
	acked bool
	again bool
}

type member struct {
	id  MemberID
	out []key // delivered, not acknowledged, in delivery order
}

// pub is the dispatcher's view of one pubend.
type pub struct {
	id msg.PubendID
	// released: every matching event at or below it was acknowledged by
	// a member (the group's checkpoint for this pubend).
	released tick.Tick
	// through: the subscription has been told everything up to it
	// (events, progress, gaps, its start).
	through tick.Tick
	// ticks: the events above released, in tick order (acked or not).
	ticks []tick.Tick
	// waiting counts its events in the queue; handed is the tick of the
	// last of its events taken from the queue in arrival order (not one
	// given again): every event it was sent up to there is out of the
	// queue (Handed).
	waiting int
	handed  tick.Tick
}

// Dispatcher is one group's state at its home.
type Dispatcher struct {
	maxUnacked int
	window     int
	members    []*member // in the order they joined
	byID       map[MemberID]*member
	next       int   // round-robin cursor into members, for ties
	pending    []key // events waiting for a member, in the order they go out
	evs        map[key]*entry
	pubs       map[msg.PubendID]*pub
	out        []Delivery
}

// Config bounds a dispatcher; zero values take the defaults.
type Config struct {
	MaxUnacked int // per member (DefaultMaxUnacked)
	Window     int // out or acknowledged above the checkpoint (DefaultWindow)
}

// New returns a dispatcher bounded by cfg, resuming from released (the
// group's checkpoint as persisted; nil for a new group).
func New(cfg Config, released msg.Token) *Dispatcher {
	if cfg.MaxUnacked <= 0 {
		cfg.MaxUnacked = DefaultMaxUnacked
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	d := &Dispatcher{maxUnacked: cfg.MaxUnacked, window: cfg.Window, byID: map[MemberID]*member{}, evs: map[key]*entry{}, pubs: map[msg.PubendID]*pub{}}
	for p, t := range released {
		d.pubs[p] = &pub{id: p, released: t, through: t}
	}
	return d
}

// Start: the group's subscription is in force from tok; it has everything
// up to it of each pubend.
func (d *Dispatcher) Start(tok msg.Token) {
	for _, p := range slices.Sorted(maps.Keys(tok)) {
		d.advance(p, tok[p])
	}
}

// Event takes an event of the group's subscription. One the group holds
// already, or at or below its pubend's released prefix, is ignored: a
// subscription attached again from the checkpoint is sent those again.
func (d *Dispatcher) Event(ev *msg.Event) {
	k := key{ev.Pubend, ev.Tick}
	ps := d.pub(ev.Pubend)
	if ev.Tick <= ps.released {
		return
	}
	ps.through = max(ps.through, ev.Tick) // the events come in tick order
	if d.evs[k] != nil {
		d.settle(ps)
		return
	}
	// In tick order, but for an event dropped (DropPending) and sent again.
	i, _ := slices.BinarySearch(ps.ticks, ev.Tick)
	ps.ticks = slices.Insert(ps.ticks, i, ev.Tick)
	d.evs[k] = &entry{ev: ev}
	d.pending = append(d.pending, k)
	ps.waiting++
	d.settle(ps) // nothing matched between what it was told and ev
	d.dispatch()
}

// Progress: nothing (more) matched up to t of pubend p (a progress notice,
// or a gap notice: what it covers is gone for the group as for anyone).
func (d *Dispatcher) Progress(p msg.PubendID, t tick.Tick) { d.advance(p, t) }

func (d *Dispatcher) advance(p msg.PubendID, t tick.Tick) {
	ps := d.pub(p)
	if t > ps.through {
		ps.through = t
	}
	d.settle(ps)
}

// Join adds member id (a second join of the same id is ignored).
func (d *Dispatcher) Join(id MemberID) {
	if d.byID[id] != nil {
		return
	}
	m := &member{id: id}
	d.byID[id] = m
	d.members = append(d.members, m)
	d.dispatch()
}

// Leave removes member id; the events it had not acknowledged go to the
// other members first, in the order it got them.
func (d *Dispatcher) Leave(id MemberID) {
	m := d.byID[id]
	if m == nil {
		return
	}
	delete(d.byID, id)
	i := slices.Index(d.members, m)
	d.members = slices.Delete(d.members, i, i+1)
	if d.next > i {
		d.next--
	}
	if d.next >= len(d.members) {
		d.next = 0
	}
	for _, k := range m.out {
		e := d.evs[k]
		e.owner, e.again = nil, true
		d.pubs[k.p].waiting++
	}
	d.pending = append(slices.Clip(m.out), d.pending...)
	d.dispatch()
}

// Ack: member id has consumed the event at tick t of pubend p. An ack of
// an event the member does not hold (acked already, or given to another
// after a departure) is ignored; the result says whether it counted.
func (d *Dispatcher) Ack(id MemberID, p msg.PubendID, t tick.Tick) bool {
	m := d.byID[id]
	k := key{p, t}
	e := d.evs[k]
	if m == nil || e == nil || e.owner != m || e.acked {
		return false
	}
	e.acked, e.owner = true, nil
	if i := slices.Index(m.out, k); i >= 0 {
		m.out = slices.Delete(m.out, i, i+1)
	}
	d.settle(d.pubs[p])
	d.dispatch()
	return true
}

// settle moves ps's released prefix over the acknowledged events at its
// front, and up to what the group was told when nothing is left.
func (d *Dispatcher) settle(ps *pub) {
	n := 0
	for n < len(ps.ticks) {
		k := key{ps.id, ps.ticks[n]}
		if !d.evs[k].acked {
			break
		}
		delete(d.evs, k)
		ps.released = ps.ticks[n]
		n++
	}
	ps.ticks = ps.ticks[n:]
	// Everything it was told up to through matched nothing but what it
	// holds; below its first held event nothing is unacknowledged.
	upTo := ps.through
	if len(ps.ticks) > 0 {
		upTo = min(upTo, ps.ticks[0]-1)
	}
	ps.released = max(ps.released, upTo)
}

// DropPending forgets the events waiting for a member (none is out or
// acknowledged): the shell does it when it puts the subscription away for
// a backlog, and the subscription attached again from the checkpoint
// sends them again. Each pubend's "told up to" goes back below its first
// dropped event, so the checkpoint never passes one. It returns how many
// it dropped.
func (d *Dispatcher) DropPending() int {
	n := len(d.pending)
	for _, k := range d.pending {
		ps := d.pubs[k.p]
		ps.waiting = 0
		if k.t <= ps.through {
			ps.through = k.t - 1
		}
		delete(d.evs, k)
		if i, ok := slices.BinarySearch(ps.ticks, k.t); ok {
			ps.ticks = slices.Delete(ps.ticks, i, i+1)
		}
	}
	d.pending = nil
	return n
}

// Handed is, per pubend, the tick up to which every event the group was
// sent is out of its queue (given to a member, or acknowledged): what the
// shell reports taken (msg.SubConsumed), so that a catch-up goes at the
// members' pace.
func (d *Dispatcher) Handed() msg.Token {
	tok := msg.Token{}
	for p, ps := range d.pubs {
		if ps.waiting == 0 {
			tok[p] = ps.through
		} else {
			tok[p] = max(ps.handed, ps.released)
		}
	}
	return tok
}

// Room is how many more events the members could take now: their room
// under MaxUnacked, within the window's.
func (d *Dispatcher) Room() int {
	n := 0
	for _, m := range d.members {
		n += max(0, d.maxUnacked-len(m.out))
	}
	return min(n, max(0, d.window-(len(d.evs)-len(d.pending))))
}

func (d *Dispatcher) pub(p msg.PubendID) *pub {
	ps := d.pubs[p]
	if ps == nil {
		ps = &pub{id: p}
		d.pubs[p] = ps
	}
	return ps
}

// dispatch hands pending events out, each to the member with the fewest
// unacknowledged (ties in turn), while one has room and the window above
// the checkpoint has too.
func (d *Dispatcher) dispatch() {
	for len(d.pending) > 0 && len(d.evs)-len(d.pending) < d.window {
		m := d.pick()
		if m == nil {
			return
		}
		k := d.pending[0]
		d.pending = d.pending[1:]
		e := d.evs[k]
		e.owner = m
		m.out = append(m.out, k)
		ps := d.pubs[k.p]
		ps.waiting--
		if !e.again {
			ps.handed = max(ps.handed, k.t)
		}
		d.out = append(d.out, Delivery{To: m.id, Event: e.ev, Again: e.again})
	}
	if len(d.pending) == 0 {
		d.pending = nil
	}
}

// pick returns the member with room and the fewest unacknowledged events,
// the first from the round-robin cursor on among equals, and moves the
// cursor past it; nil when none has room.
func (d *Dispatcher) pick() *member {
	n := len(d.members)
	best := -1
	for j := range n {
		i := (d.next + j) % n
		m := d.members[i]
		if len(m.out) >= d.maxUnacked {
			continue
		}
		if best < 0 || len(m.out) < len(d.members[best].out) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	d.next = (best + 1) % n
	return d.members[best]
}

// Ready returns the deliveries made since the last call, in order.
func (d *Dispatcher) Ready() []Delivery {
	out := d.out
	d.out = nil
	return out
}

// Released is the group's checkpoint: per pubend, every matching event at
// or below its tick was acknowledged by a member.
func (d *Dispatcher) Released() msg.Token {
	tok := msg.Token{}
	for p, ps := range d.pubs {
		tok[p] = ps.released
	}
	return tok
}

// Members lists the members in the order they joined.
func (d *Dispatcher) Members() []MemberID {
	out := make([]MemberID, len(d.members))
	for i, m := range d.members {
		out[i] = m.id
	}
	return out
}

// Unacked is the number of events member id holds unacknowledged.
func (d *Dispatcher) Unacked(id MemberID) int {
	if m := d.byID[id]; m != nil {
		return len(m.out)
	}
	return 0
}

// Pending is the number of events waiting for a member with room.
func (d *Dispatcher) Pending() int { return len(d.pending) }

// Held is the number of events the dispatcher holds above the released
// prefixes (pending, out at members, or acked out of order).
func (d *Dispatcher) Held() int { return len(d.evs) }

// String describes the state, for tests: per pubend the released prefix,
// what the group was told and the events held; per member what it holds.
func (d *Dispatcher) String() string {
	var s string
	for _, p := range slices.Sorted(maps.Keys(d.pubs)) {
		ps := d.pubs[p]
		s += fmt.Sprintf("%s: released %d through %d", p, ps.released, ps.through)
		for _, t := range ps.ticks {
			e := d.evs[key{p, t}]
			switch {
			case e.acked:
				s += fmt.Sprintf(" %d:acked", t)
			case e.owner != nil:
				s += fmt.Sprintf(" %d:%s", t, e.owner.id)
			default:
				s += fmt.Sprintf(" %d:pending", t)
			}
		}
		s += "\n"
	}
	for _, m := range d.members {
		s += fmt.Sprintf("member %s: %d unacked\n", m.id, len(m.out))
	}
	return s
}
