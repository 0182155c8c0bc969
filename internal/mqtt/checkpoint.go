package mqtt

import (
	"maps"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// checkpoints is what a persistent session's connection has handed its
// client and what the client has acknowledged, per durable subscription
// and pubend, in delivery order. A subscription's checkpoint for a pubend
// (Gryphon DS §3: what its subscriber has consumed) moves to a tick once
// every delivery up to it is done: PUBACKed at QoS 1, written at QoS 0,
// or a notice with nothing to deliver (msg.Progress, msg.Gap). An MQTT
// client may PUBACK out of order (MQTT 4.6 asks for order, not every
// client keeps it), so the checkpoint never passes a delivery still
// unacknowledged: a reconnecting client gets it again, and nothing after
// the checkpoint is lost. The Conn's mu guards it.
type checkpoints struct {
	subs  map[msg.SubID]map[msg.PubendID]*markQueue
	due   map[msg.SubID]msg.Token // moved, not yet told to the broker
	acked map[msg.SubID]msg.Token // told to the broker (or restored from it)
}

// markQueue is one pubend's deliveries on one subscription not yet
// passed by the checkpoint; marks[0] has sequence number base.
type markQueue struct {
	base  uint64
	marks []mark
}

type mark struct {
	t    tick.Tick
	done bool
}

// markRef finds a mark again when its PUBACK comes.
type markRef struct {
	sub    msg.SubID
	pubend msg.PubendID
	seq    uint64
}

func newCheckpoints() checkpoints {
	return checkpoints{subs: map[msg.SubID]map[msg.PubendID]*markQueue{},
		due: map[msg.SubID]msg.Token{}, acked: map[msg.SubID]msg.Token{}}
}

// add records a delivery (done: nothing to wait for) at tick t of pubend
// on subscription sub, and returns where it is.
func (c *checkpoints) add(sub msg.SubID, pubend msg.PubendID, t tick.Tick, done bool) markRef {
	ps := c.subs[sub]
	if ps == nil {
		ps = map[msg.PubendID]*markQueue{}
		c.subs[sub] = ps
	}
	q := ps[pubend]
	if q == nil {
		q = &markQueue{}
		ps[pubend] = q
	}
	q.marks = append(q.marks, mark{t: t, done: done})
	ref := markRef{sub: sub, pubend: pubend, seq: q.base + uint64(len(q.marks)) - 1}
	if done {
		c.advance(sub, pubend, q)
	}
	return ref
}

// done marks a delivery acknowledged.
func (c *checkpoints) done(r markRef) {
	q := c.subs[r.sub][r.pubend]
	if q == nil || r.seq < q.base || r.seq-q.base >= uint64(len(q.marks)) {
		return // its subscription was dropped meanwhile
	}
	q.marks[r.seq-q.base].done = true
	c.advance(r.sub, r.pubend, q)
}

// advance moves the checkpoint over the done marks at the head.
func (c *checkpoints) advance(sub msg.SubID, pubend msg.PubendID, q *markQueue) {
	n := 0
	for n < len(q.marks) && q.marks[n].done {
		n++
	}
	if n == 0 {
		return
	}
	t := q.marks[n-1].t
	q.marks = q.marks[n:]
	q.base += uint64(n)
	tok := c.due[sub]
	if tok == nil {
		tok = msg.Token{}
		c.due[sub] = tok
	}
	if t > tok[pubend] {
		tok[pubend] = t
	}
}

// take returns the checkpoints moved since the last take, to be told to
// the broker, and counts them as told.
func (c *checkpoints) take() map[msg.SubID]msg.Token {
	if len(c.due) == 0 {
		return nil
	}
	due := c.due
	c.due = map[msg.SubID]msg.Token{}
	for sub, tok := range due {
		a := c.acked[sub]
		if a == nil {
			a = msg.Token{}
			c.acked[sub] = a
		}
		for p, t := range tok {
			a[p] = max(a[p], t)
		}
	}
	return due
}

// restored: the broker holds sub's checkpoint at tok.
func (c *checkpoints) restored(sub msg.SubID, tok msg.Token) {
	c.acked[sub] = maps.Clone(tok)
}

// ackedOf is sub's checkpoint: as the broker has it, or moved since (nil:
// none known).
func (c *checkpoints) ackedOf(sub msg.SubID) msg.Token {
	tok := maps.Clone(c.acked[sub])
	for p, t := range c.due[sub] {
		if tok == nil {
			tok = msg.Token{}
		}
		tok[p] = max(tok[p], t)
	}
	return tok
}

// forget drops sub (unsubscribed, or moved to a new name).
func (c *checkpoints) forget(sub msg.SubID) {
	delete(c.subs, sub)
	delete(c.due, sub)
	delete(c.acked, sub)
}

// doneBeyond is every delivery done and not yet passed by its
// subscription's checkpoint (one still waits before it).
func (c *checkpoints) doneBeyond() map[deliveryKey]bool {
	out := map[deliveryKey]bool{}
	for sub, ps := range c.subs {
		for p, q := range ps {
			for _, m := range q.marks {
				if m.done {
					out[deliveryKey{sub, p, m.t}] = true
				}
			}
		}
	}
	return out
}

// tickOf is the tick of the delivery r marks, if its mark is still held.
func (c *checkpoints) tickOf(r markRef) (tick.Tick, bool) {
	q := c.subs[r.sub][r.pubend]
	if q == nil || r.seq < q.base || r.seq-q.base >= uint64(len(q.marks)) {
		return 0, false
	}
	return q.marks[r.seq-q.base].t, true
}
