// Package forward is one-hop forwarding in a replicated PHB cell (the
// Geode notes' "one hop, ack client"; P2S, DEBS 2014 §3, has a replica
// hand a client's request to the leader the same way; docs/REPLICATION.md
// "Clients"). A member that does not serve keeps a
// publishing client's connection, forwards each of its publishes to the
// serving leader in a msg.Forward over the cell's link, and relays the
// leader's answer back (Forwarder); the leader takes of what it is sent a
// prefix of each client's publishes, in order (Refusals).
//
// The member sends a client's publishes as streams (Forward.Client names
// one): a new stream for every resend and every change of leader or of
// the link to it, each in the order the client sent them and opening with
// the oldest unanswered. A leader that refused one publish of a stream,
// because it did not serve yet or lost the shell that held some, refuses
// the rest of that stream; the member's resend is the next stream. So what
// the leader takes of a client is the client's publishes in order
// (docs/known-issues/forward-reorder.md: three ways it was not).
//
// Both halves are pure state machines: the broker (internal/broker) and
// the simulator drive them with the cell's links, clients and clock.
package forward

import (
	"cmp"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// ClientGone is the reason of the Goodbye a forwarding member sends the
// leader when a stream ends: its client is gone, or a new stream
// supersedes it.
const ClientGone = "client gone"

// Net is what a Forwarder sends through.
type Net interface {
	// Send sends m to cell member to over link, if that is still the link
	// to it (nil: over whichever link to it is up). A publish goes only
	// on the link its stream was opened on: had the link changed since,
	// the leader may have dropped what the stream sent on the old one,
	// and the publish would be taken after a gap (Follow resends it, in a
	// new stream).
	Send(to msg.NodeID, link any, m msg.Forward)
	// ToClient hands a client the leader's answer.
	ToClient(c shell.ClientID, m msg.Msg)
}

// pubKey names one publish: the pubend's deduplication key.
type pubKey struct {
	publisher string
	seq       uint64
}

// held is an unanswered publish, numbered in the order it arrived.
type held struct {
	n uint64
	p msg.Publish
}

// client is a client a Forwarder forwards for.
type client struct {
	ranges  bool // it reads PubAckRange
	pending map[pubKey]held
	next    uint64
	// stream names its publishes at the leader, opened towards member
	// to; streams are the last keepStreams it had (answers on a
	// superseded one still count).
	stream  uint64
	to      msg.NodeID
	streams []uint64
	// parked: its unanswered publishes wait for a serving leader (none is
	// known, or the one asked does not serve); new ones queue behind them.
	parked bool
	// stalled is when its publishes last found no serving leader, with
	// nothing answered since (zero: not stalled).
	stalled time.Time
}

// Forwarder is the forwarding half, at a member that does not serve.
type Forwarder struct {
	net Net
	// timeout bounds how long a client's publishes wait for a serving
	// leader before Follow gives the client up.
	timeout time.Duration
	clients map[shell.ClientID]*client
	// target is the member publishes go to ("" while no serving leader is
	// known), under the term it leads, over link.
	target msg.NodeID
	term   uint64
	link   any
	// streams maps every stream of a client here to it; last numbers
	// them over the Forwarder's life: a stream is never named twice.
	streams map[uint64]shell.ClientID
	last    uint64
}

// NewForwarder returns a Forwarder that sends through net and gives up a
// client whose publishes found no serving leader for timeout.
func NewForwarder(net Net, timeout time.Duration) *Forwarder {
	return &Forwarder{net: net, timeout: timeout, clients: map[shell.ClientID]*client{}, streams: map[uint64]shell.ClientID{}}
}

// Len is the number of clients it forwards for.
func (f *Forwarder) Len() int { return len(f.clients) }

// Has says whether it forwards for c.
func (f *Forwarder) Has(c shell.ClientID) bool { return f.clients[c] != nil }

// ClientUp: client c connected; ranges says it reads PubAckRange.
func (f *Forwarder) ClientUp(c shell.ClientID, ranges bool) {
	fc := &client{ranges: ranges, pending: map[pubKey]held{}, parked: f.target == ""}
	f.clients[c] = fc
	f.open(c, fc)
}

// ClientDown: client c is gone; the leader frees its stream's session.
func (f *Forwarder) ClientDown(c shell.ClientID) {
	fc := f.clients[c]
	if fc == nil {
		return
	}
	delete(f.clients, c)
	f.end(fc)
	for _, s := range fc.streams {
		delete(f.streams, s)
	}
}

// keepStreams is how many of a client's latest streams a Forwarder reads
// answers on. A client gets a new stream at every change of leader or
// link and at every retry a leader refused, without end while one is
// elected but does not serve; each opens with every unanswered publish,
// so an answer on an older stream only comes sooner, and one dropped is
// given again on a later stream (the pubend deduplicates).
const keepStreams = 4

// open gives fc a new stream towards the current target, and ends the one
// before at the member it went to.
func (f *Forwarder) open(c shell.ClientID, fc *client) {
	f.end(fc)
	f.last++
	fc.stream, fc.to = f.last, f.target
	if len(fc.streams) == keepStreams {
		delete(f.streams, fc.streams[0])
		fc.streams = append(fc.streams[:0], fc.streams[1:]...)
	}
	fc.streams = append(fc.streams, fc.stream)
	f.streams[fc.stream] = c
}

// Streams is how many streams it reads answers on: at most keepStreams
// for each client it forwards for.
func (f *Forwarder) Streams() int { return len(f.streams) }

// end tells the member fc's stream went to that it ends: its session and
// refusal there are freed. What was sent of it on the same link arrives
// before.
func (f *Forwarder) end(fc *client) {
	if fc.stream != 0 && fc.to != "" {
		f.net.Send(fc.to, nil, msg.Forward{Client: fc.stream, Msg: msg.Goodbye{Reason: ClientGone}})
	}
}

// Publish forwards a publish of client c (its permissions checked), or
// queues it behind those that wait for a leader. A retry of one still
// unanswered adds nothing.
func (f *Forwarder) Publish(c shell.ClientID, p msg.Publish) {
	fc := f.clients[c]
	if fc == nil {
		return
	}
	k := pubKey{p.Publisher, p.Seq}
	if _, dup := fc.pending[k]; dup {
		return
	}
	fc.next++
	fc.pending[k] = held{n: fc.next, p: p}
	if !fc.parked && f.target != "" {
		f.net.Send(f.target, f.link, msg.Forward{Client: fc.stream, Msg: p})
	}
}

// FromLeader handles a Forward from cell member from at now: an answer
// for a client of this member, or a Goodbye (the leader does not serve
// the stream).
func (f *Forwarder) FromLeader(now time.Time, from msg.NodeID, m msg.Forward) {
	c := f.streams[m.Client]
	fc := f.clients[c]
	if fc == nil {
		return
	}
	switch a := m.Msg.(type) {
	case msg.PubAck:
		f.answer(c, fc, pubKey{a.Publisher, a.Seq}, a)
	case msg.PubReject:
		f.answer(c, fc, pubKey{a.Publisher, a.Seq}, a)
	case msg.PubAckRange:
		f.answerRange(c, fc, a)
	case msg.Goodbye:
		if fc.stream == m.Client && from == f.target {
			// The leader does not serve (yet, or any more): resend on the
			// next retry, or to the next leader. (A refusal of a stream
			// already superseded asks for nothing: its resend is under way.)
			fc.parked = true
			if fc.stalled.IsZero() {
				fc.stalled = now
			}
		}
	}
}

func (f *Forwarder) answer(c shell.ClientID, fc *client, k pubKey, m msg.Msg) {
	if _, ok := fc.pending[k]; !ok {
		return // answered before (a resend's duplicate answer)
	}
	delete(fc.pending, k)
	fc.stalled = time.Time{}
	f.net.ToClient(c, m)
}

// answerRange relays the leader's range of acks: whole, if the client
// reads ranges and every publish in it was unanswered; else a PubAck for
// each one that was (a resend's duplicate answer is dropped).
func (f *Forwarder) answerRange(c shell.ClientID, fc *client, r msg.PubAckRange) {
	answered := 0
	for i := range r.Len() {
		if _, ok := fc.pending[pubKey{r.Publisher, r.Seq + uint64(i)}]; ok {
			answered++
		}
	}
	if answered == 0 {
		return
	}
	fc.stalled = time.Time{}
	whole := answered == r.Len() && fc.ranges
	for i := range r.Len() {
		k := pubKey{r.Publisher, r.Seq + uint64(i)}
		if _, ok := fc.pending[k]; !ok {
			continue
		}
		delete(fc.pending, k)
		if !whole {
			f.net.ToClient(c, r.Ack(i))
		}
	}
	if whole {
		f.net.ToClient(c, r)
	}
}

// Stalled is a client Follow gave up: its Unanswered publishes found no
// serving leader for the timeout.
type Stalled struct {
	Client     shell.ClientID
	Unanswered int
}

// Follow follows the leader: to, the member that leads term (""
// when none serves that this member knows of and is linked to), over
// link (an identity the caller compares; nil for none). When any of them
// changed, every client gets a new stream and its unanswered publishes go
// to the new leader. On a retry (the caller's timer) the parked clients
// are resent too, and those stalled for longer than the timeout are given
// up and returned: the caller closes them.
func (f *Forwarder) Follow(now time.Time, to msg.NodeID, term uint64, link any, retry bool) []Stalled {
	if len(f.clients) == 0 {
		f.target, f.term, f.link = "", 0, nil
		return nil
	}
	changed := to != f.target || term != f.term || link != f.link
	f.target, f.term, f.link = to, term, link
	if !changed && !retry {
		return nil // the common case, on every turn of the caller's loop
	}
	var gone []Stalled
	for _, c := range f.byID() {
		fc := f.clients[c]
		if changed {
			f.open(c, fc)
		}
		if len(fc.pending) == 0 {
			fc.parked, fc.stalled = to == "", time.Time{}
			continue
		}
		if to == "" {
			fc.parked = true
			if fc.stalled.IsZero() {
				fc.stalled = now
			}
			if retry && now.Sub(fc.stalled) > f.timeout {
				gone = append(gone, Stalled{Client: c, Unanswered: len(fc.pending)})
			}
			continue
		}
		if changed || (retry && fc.parked) {
			if !changed {
				f.open(c, fc)
			}
			f.resend(fc)
		}
	}
	for _, s := range gone {
		f.ClientDown(s.Client)
	}
	return gone
}

// byID returns the clients in the order of their ids: what a Forwarder
// sends does not depend on a map's order (the simulator replays a seed).
func (f *Forwarder) byID() []shell.ClientID {
	cs := make([]shell.ClientID, 0, len(f.clients))
	for c := range f.clients {
		cs = append(cs, c)
	}
	slices.Sort(cs)
	return cs
}

// resend sends a client's unanswered publishes, in the order they came,
// in its current stream.
func (f *Forwarder) resend(fc *client) {
	fc.parked = false
	for _, h := range fc.inOrder() {
		f.net.Send(f.target, f.link, msg.Forward{Client: fc.stream, Msg: h.p})
	}
}

func (fc *client) inOrder() []held {
	hs := make([]held, 0, len(fc.pending))
	for _, h := range fc.pending {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b held) int { return cmp.Compare(a.n, b.n) })
	return hs
}

// Taken is a client this member forwarded for, now its own: its
// unanswered publishes, in the order they came.
type Taken struct {
	Client    shell.ClientID
	Ranges    bool
	Publishes []msg.Publish
}

// TakeOver hands over every client when this member starts to serve: the
// caller opens their sessions and hands its engine their unanswered
// publishes, in order (deduplicated if the old leader committed them).
// The Forwarder is then empty; its streams stay numbered.
func (f *Forwarder) TakeOver() []Taken {
	out := make([]Taken, 0, len(f.clients))
	for _, c := range f.byID() {
		fc := f.clients[c]
		t := Taken{Client: c, Ranges: fc.ranges}
		for _, h := range fc.inOrder() {
			t.Publishes = append(t.Publishes, h.p)
		}
		out = append(out, t)
	}
	clear(f.clients)
	clear(f.streams)
	f.target, f.term, f.link = "", 0, nil
	return out
}
